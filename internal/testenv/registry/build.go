package registry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
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
	data, err := tarFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// tarFiles is Tar, returning its error.
func tarFiles(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(files[p])), Typeflag: tar.TypeReg}); err != nil {
			return nil, fmt.Errorf("writing tar header %s: %w", p, err)
		}
		if _, err := io.WriteString(tw, files[p]); err != nil {
			return nil, fmt.Errorf("writing tar entry %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing tar: %w", err)
	}
	return buf.Bytes(), nil
}

// Gzip compresses data.
func Gzip(t testing.TB, data []byte) []byte {
	t.Helper()
	out, err := gzipData(data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gzipData is Gzip, returning its error.
func gzipData(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(data); err != nil {
		return nil, fmt.Errorf("compressing: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("compressing: %w", err)
	}
	return buf.Bytes(), nil
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
	img, err := newArtifact(configType, layerType, data)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// newArtifact is Artifact, returning its error.
func newArtifact(configType, layerType types.MediaType, data []byte) (v1.Image, error) {
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:     static.NewLayer(data, layerType),
		MediaType: layerType,
	})
	if err != nil {
		return nil, fmt.Errorf("making an artifact: %w", err)
	}
	return mutate.ConfigMediaType(img, configType), nil
}

// HelmChart returns a Helm chart as Helm stores charts in OCI registries:
// the chart config and one tar+gzip layer of Chart.yaml (name, version) and
// files, which are relative to the chart's folder.
func HelmChart(t testing.TB, name, version string, files map[string]string) v1.Image {
	t.Helper()
	img, err := NewHelmChart(name, version, files)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// NewHelmChart is HelmChart for programs that are not tests (make demo):
// it returns an error instead of failing a test.
func NewHelmChart(name, version string, files map[string]string) (v1.Image, error) {
	content := map[string]string{name + "/Chart.yaml": "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n"}
	for p, body := range files {
		content[name+"/"+p] = body
	}
	tarData, err := tarFiles(content)
	if err != nil {
		return nil, err
	}
	gz, err := gzipData(tarData)
	if err != nil {
		return nil, err
	}
	return newArtifact(helmConfigMediaType, helmChartMediaType, gz)
}
