package e2e

import (
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// imageLayer returns a gzip-compressed OCI image layer holding files.
func imageLayer(t testing.TB, files map[string]string) v1.Layer {
	t.Helper()
	return registry.Layer(t, registry.Tar(t, files))
}

// helmChart returns a Helm chart name at version as Helm stores charts in
// OCI registries: the chart config and one tar+gzip layer.
func helmChart(t testing.TB, name, version string) v1.Image {
	t.Helper()
	return registry.HelmChart(t, name, version, map[string]string{
		"values.yaml":               "replicas: 1\n",
		"templates/deployment.yaml": "kind: Deployment\n",
	})
}
