// Command uprev is uprev's one binary: the manager (image scanning,
// write-back and apply; `uprev run`, or the bare binary with flags) and the
// command line that people use next to it (`uprev get`, `uprev plan`,
// `uprev reconcile`, ...). The commands are in internal/cli.
package main

import (
	"os"

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
