// Command uprev is uprev's one binary: the manager (image scanning,
// write-back and apply; `uprev run`, or the bare binary with flags) and the
// command line that people use next to it (`uprev get`, `uprev plan`,
// `uprev reconcile`, ...). The commands are in internal/cli.
//
// The binary carries Mozilla's root certificates (x509roots/fallback),
// used when the system has none: the manager's image is the binary alone,
// with no CA bundle to go stale beside it, and reaches registries and Git
// servers over TLS all the same.
package main

import (
	"os"

	_ "golang.org/x/crypto/x509roots/fallback"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/uprev-dev/uprev/internal/cli"
)

func main() {
	ctx := ctrl.SetupSignalHandler()
	os.Exit(cli.Execute(ctx, os.Args[1:], cli.Options{
		IOStreams: genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
	}))
}
