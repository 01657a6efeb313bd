// Command push-tag pushes a new release to the registry of `make demo`, so
// that trying the demo needs no other tool:
//
//	go run ./hack/demo/push-tag 127.0.0.1:PORT/acme/agent:1.1.0
//	go run ./hack/demo/push-tag --chart 127.0.0.1:PORT/charts/agent:1.1.0
//
// The first pushes an agent image; the second the agent's Helm chart, whose
// CRDs are labelled with the chart's version, so every chart release
// changes them. The demo prints both lines with its registry's address.
//
// Then it notifies the demo's manager of the push, as a registry's webhook
// does (docs/webhooks.md): the demo's in-process registry sends none, and
// the demo's ImageRepositories are scanned only every 5 minutes otherwise.
// Where to send it is in the demo's state file (--state-dir).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/uprev-dev/uprev/hack/demo/internal/notify"
	"github.com/uprev-dev/uprev/hack/demo/internal/release"
)

func main() {
	fs := flag.NewFlagSet("push-tag", flag.ContinueOnError)
	chart := fs.Bool("chart", false, "push the agent's Helm chart (with its CRDs) instead of an agent image")
	stateDir := fs.String("state-dir", filepath.Join("bin", "demo"), "the running demo's state directory, whose state.json says where to send the registry's push webhook")
	fs.Usage = func() {
		_, _ = fmt.Fprintln(fs.Output(), "usage: go run ./hack/demo/push-tag [--chart] HOST:PORT/REPOSITORY:TAG")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		os.Exit(2)
	}
	if err := pushTag(fs.Arg(0), *chart, *stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "push-tag:", err)
		os.Exit(1)
	}
}

// pushTag pushes an agent image, or the agent's chart, as ref (the tag is
// the release's version), and notifies the demo in stateDir of the push.
func pushTag(ref string, chart bool, stateDir string) error {
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
	hook, err := webhook(stateDir)
	if err != nil {
		return err
	}
	if err := hook.RegistryPush(context.Background(), tag.RegistryStr(), tag.RepositoryStr(), tag.TagStr()); err != nil {
		return err
	}
	fmt.Printf("notified uprev's registry webhook at %s\n", hook.URL)
	return nil
}

// webhook reads where the demo in stateDir receives webhooks.
func webhook(stateDir string) (notify.Endpoint, error) {
	file := filepath.Join(stateDir, "state.json")
	data, err := os.ReadFile(file)
	if err != nil {
		return notify.Endpoint{}, fmt.Errorf("pushed, but cannot tell uprev (is the demo running? make demo): %w", err)
	}
	var state struct {
		Webhook *notify.Endpoint `json:"webhook"`
	}
	if err := json.Unmarshal(data, &state); err != nil || state.Webhook == nil {
		return notify.Endpoint{}, fmt.Errorf("pushed, but %s does not say where uprev receives webhooks (%v): is the demo still starting?", file, err)
	}
	return *state.Webhook, nil
}
