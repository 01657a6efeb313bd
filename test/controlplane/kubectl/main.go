// Command kubectl is the upstream Kubernetes command-line client, built from
// the Go module proxy at the control plane's version, so that tests can run
// `kubectl apply -k config/default` against a real API server.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

// main mirrors k8s.io/kubernetes/cmd/kubectl, without the cloud auth plugins
// that tests have no use for.
func main() {
	// Verbosity is set before the command is built, as upstream does, so
	// that klog works while plugins and .kuberc are handled.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) //nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
