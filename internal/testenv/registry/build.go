package registry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"maps"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of a Helm chart stored in an OCI registry.
const (
	helmConfigMediaType types.MediaType = "application/vnd.cncf.helm.config.v1+json"
	helmChartMediaType  types.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// Tar returns an uncompressed tar archive of regular files (path →
// content), in path order.
func Tar(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(files[p])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatalf("writing tar header %s: %v", p, err)
		}
		if _, err := io.WriteString(tw, files[p]); err != nil {
			t.Fatalf("writing tar entry %s: %v", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("closing tar: %v", err)
	}
	return buf.Bytes()
}

// Gzip compresses data.
func Gzip(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(data); err != nil {
		t.Fatalf("compressing: %v", err)
	}
	if err := gz.Close(); err != nil {
		t.Fatalf("compressing: %v", err)
	}
	return buf.Bytes()
}

// Layer returns a gzip-compressed container image layer of the
// uncompressed tar archive tarData.
func Layer(t testing.TB, tarData []byte) v1.Layer {
	t.Helper()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarData)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatalf("making a layer: %v", err)
	}
	return layer
}

// ImageOf returns an OCI container image of layers, bottom first.
func ImageOf(t testing.TB, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		t.Fatalf("making an image: %v", err)
	}
	return img
}

// Artifact returns an OCI artifact of config media type configType with one
// layer, data, of media type layerType, as helm push and flux push make.
func Artifact(t testing.TB, configType, layerType types.MediaType, data []byte) v1.Image {
	t.Helper()
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:     static.NewLayer(data, layerType),
		MediaType: layerType,
	})
	if err != nil {
		t.Fatalf("making an artifact: %v", err)
	}
	return mutate.ConfigMediaType(img, configType)
}

// HelmChart returns a Helm chart as Helm stores charts in OCI registries:
// the chart config and one tar+gzip layer of Chart.yaml (name, version) and
// files, which are relative to the chart's folder.
func HelmChart(t testing.TB, name, version string, files map[string]string) v1.Image {
	t.Helper()
	content := map[string]string{name + "/Chart.yaml": "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n"}
	for p, body := range files {
		content[name+"/"+p] = body
	}
	return Artifact(t, helmConfigMediaType, helmChartMediaType, Gzip(t, Tar(t, content)))
}
