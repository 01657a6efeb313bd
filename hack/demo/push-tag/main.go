// Command push-tag pushes a new release to the registry of `make demo`, so
// that trying the demo needs no other tool:
//
//	go run ./hack/demo/push-tag 127.0.0.1:PORT/acme/agent:1.1.0
//	go run ./hack/demo/push-tag --chart 127.0.0.1:PORT/charts/agent:1.1.0
//
// The first pushes an agent image; the second the agent's Helm chart, whose
// CRDs are labelled with the chart's version, so every chart release
// changes them. The demo prints both lines with its registry's address.
package main

import (
	"flag"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/uprev-dev/uprev/hack/demo/internal/release"
)

func main() {
	fs := flag.NewFlagSet("push-tag", flag.ContinueOnError)
	chart := fs.Bool("chart", false, "push the agent's Helm chart (with its CRDs) instead of an agent image")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: go run ./hack/demo/push-tag [--chart] HOST:PORT/REPOSITORY:TAG")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		os.Exit(2)
	}
	if err := pushTag(fs.Arg(0), *chart); err != nil {
		fmt.Fprintln(os.Stderr, "push-tag:", err)
		os.Exit(1)
	}
}

// pushTag pushes an agent image, or the agent's chart, as ref; the tag is
// the release's version.
func pushTag(ref string, chart bool) error {
	tag, err := release.ParseRef(ref)
	if err != nil {
		return err
	}
	var img v1.Image
	if chart {
		img, err = release.Chart(tag.TagStr())
	} else {
		img, err = release.Image(tag.TagStr())
	}
	if err != nil {
		return err
	}
	digest, err := release.Push(tag, img)
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", ref, digest)
	return nil
}
