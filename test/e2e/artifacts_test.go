package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"sort"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/uprev-dev/uprev/internal/crds"
)

// tarOf returns a tar archive of files (path → content), in path order.
func tarOf(t testing.TB, files map[string]string) []byte {
	t.Helper()
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(files[p])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, files[p]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// imageLayer returns a gzip-compressed OCI image layer holding files.
func imageLayer(t testing.TB, files map[string]string) v1.Layer {
	t.Helper()
	data := tarOf(t, files)
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatalf("making a layer: %v", err)
	}
	return layer
}

// containerImage returns an OCI image of layers, bottom first.
func containerImage(t testing.TB, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		t.Fatalf("making an image: %v", err)
	}
	return img
}

// helmChart returns a Helm chart name at version as Helm stores charts in
// OCI registries: the chart config and one tar+gzip layer.
func helmChart(t testing.TB, name, version string) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(tarOf(t, map[string]string{
		name + "/Chart.yaml":                fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\n", name, version),
		name + "/values.yaml":               "replicas: 1\n",
		name + "/templates/deployment.yaml": "kind: Deployment\n",
	})); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, crds.ChartConfigMediaType), types.OCIManifestSchema1),
		static.NewLayer(buf.Bytes(), crds.ChartLayerMediaType))
	if err != nil {
		t.Fatalf("making a chart: %v", err)
	}
	return img
}
