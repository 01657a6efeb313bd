// Command kube-apiserver is the upstream Kubernetes API server, built from the
// Go module proxy so that tests run against a real control plane.
package main

import (
	"os"

	_ "time/tzdata" // the API server validates CronJob time zones

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
