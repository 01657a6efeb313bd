// Command image builds uprev's manager image without Docker, reproducibly:
// a static binary (the Mozilla CA bundle compiled in, through
// golang.org/x/crypto/x509roots/fallback) on an empty base with the user
// 65532 that the Deployment runs as, one image per platform under one
// index, and an SPDX SBOM per platform read from the binary's build
// information. The same commit and version give the same digests: files
// and the image's creation time are stamped with the commit's time
// (SOURCE_DATE_EPOCH, when set).
//
//	go run ./hack/image --version v1.2.3 --output dist/image          # an OCI image layout
//	go run ./hack/image --version v1.2.3 --push ghcr.io/uprev-dev/uprev:v1.2.3
//
// `make image` runs the first; the release workflow the second.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	var o options
	flag.StringVar(&o.version, "version", "", "The version stamped into the binary and its labels (required): the image's tag.")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "Comma-separated os/arch pairs to build.")
	flag.StringVar(&o.output, "output", "", "Write the image index, and its SBOMs beside it, as an OCI image layout in this directory.")
	flag.StringVar(&o.push, "push", "", "Push the image index to this reference (with the credentials of ~/.docker/config.json), and each SBOM as an OCI referrer of its image.")
	flag.StringVar(&o.source, "source", ".", "The module to build: the uprev checkout.")
	flag.Parse()
	o.platforms = strings.Split(*platforms, ",")
	if err := o.run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}
