// Command demo is `make demo`: it brings up a local fleet and keeps it
// running until it is signalled (`make demo-down`, or Ctrl-C):
//
//   - three real control planes (kube-apiserver and etcd): "management",
//     where uprev runs, and the workload clusters "eu-1" and "us-1";
//   - an OCI registry holding the agent's image and its Helm chart;
//   - a Git server holding examples/getting-started/fleet;
//   - the real uprev binary (bin/uprev), started with the flags of
//     config/manager, as uprev's ServiceAccount, after the CRDs and RBAC of
//     config/ were installed with kubectl.
//
// It writes everything a person needs into a state directory (kubeconfigs,
// URLs, PIDs, the manager's log) and prints a script of things to try,
// each line a command that works as printed. test/demo runs that script.
//
//	demo up   [--state-dir bin/demo] [--uprev bin/uprev] [--assets bin/k8s]
//	demo down [--state-dir bin/demo]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// options are the flags of both subcommands.
type options struct {
	// stateDir holds the kubeconfigs, the logs, the Git repositories and
	// state.json.
	stateDir string
	// uprev is the manager binary.
	uprev string
	// assets holds kube-apiserver, etcd and kubectl.
	assets string
	// root is the repository root, which holds config/ and examples/.
	root string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs a subcommand and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		_, _ = fmt.Fprintln(stderr, "usage: demo up|down [--state-dir DIR] [--uprev BIN] [--assets DIR] [--root DIR]")
	}
	if len(args) == 0 || (args[0] != "up" && args[0] != "down") {
		usage()
		return 2
	}
	var o options
	fs := flag.NewFlagSet("demo "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.stateDir, "state-dir", filepath.Join("bin", "demo"), "directory for the demo's state: kubeconfigs, logs, Git repositories, state.json")
	fs.StringVar(&o.uprev, "uprev", filepath.Join("bin", "uprev"), "the uprev binary (make build)")
	fs.StringVar(&o.assets, "assets", defaultAssets(), "directory holding kube-apiserver, etcd and kubectl (make controlplane); default $KUBEBUILDER_ASSETS, else bin/k8s")
	fs.StringVar(&o.root, "root", ".", "the repository root, holding config/ and examples/")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if err := o.absolute(); err != nil {
		_, _ = fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	var err error
	switch args[0] {
	case "up":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = up(ctx, o, stdout)
	case "down":
		err = down(o, stdout)
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	return 0
}

// absolute makes every path of o absolute, so that nothing depends on the
// working directory once the demo runs.
func (o *options) absolute() error {
	for _, p := range []*string{&o.stateDir, &o.uprev, &o.assets, &o.root} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}

// defaultAssets is $KUBEBUILDER_ASSETS, else bin/k8s under the working
// directory, like the demo's other defaults: the binary is built trimmed
// (make build's settings) and knows no path of its source.
func defaultAssets() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join("bin", "k8s")
}
