// Command release-manifests writes the install.yaml of a release: what
// config/default installs (CRDs, RBAC, the manager), built by kustomize in
// process by internal/install (as `uprev install --export` builds it), with
// the manager's image pinned to the release's version. `make release` runs
// it:
//
//	go run ./hack/release-manifests --version v1.2.3 --output dist/install.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/uprev-dev/uprev/internal/install"
)

func main() {
	var (
		version = flag.String("version", "", "The release version, the tag of the manager's image (required), such as the output of `git describe --tags --always --dirty`.")
		image   = flag.String("image", install.ConfigImage, "The manager's image, without tag: where the release's image is pushed.")
		output  = flag.String("output", "", "The file to write; default: standard output.")
	)
	flag.Parse()
	if err := run(*version, *image, *output); err != nil {
		fmt.Fprintln(os.Stderr, "release-manifests:", err)
		os.Exit(1)
	}
}

// run builds the install.yaml and writes it to output.
func run(version, image, output string) error {
	if version == "" {
		return fmt.Errorf("--version is required")
	}
	if strings.ContainsAny(image, ":@") && strings.LastIndexAny(image, ":@") > strings.LastIndex(image, "/") {
		return fmt.Errorf("--image %q: give the image without tag; the tag is --version", image)
	}
	m, err := install.Build(install.Options{Image: image, Version: version})
	if err != nil {
		return err
	}
	out := append([]byte(fmt.Sprintf("# uprev %s: CRDs, RBAC and the manager (%s).\n# Install: kubectl apply -f install.yaml (see docs/install.md).\n", version, m.Image)), m.YAML...)
	if output == "" {
		_, err = os.Stdout.Write(out)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(output), 0o755); err != nil {
		return err
	}
	return os.WriteFile(output, out, 0o644)
}
