package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ChartMetadata is the part of a Chart.yaml that HelmChartAsPushed writes
// into the chart's config, as `helm push` does.
type ChartMetadata struct {
	Home    string   `json:"home,omitempty"`
	Sources []string `json:"sources,omitempty"`
}

// HelmChartAsPushed returns a Helm chart as `helm push` stores it: like
// HelmChart, with its Chart.yaml, as JSON, for the config (HelmChart's
// config is an empty image config).
func HelmChartAsPushed(t testing.TB, name, version string, meta ChartMetadata) v1.Image {
	t.Helper()
	config, err := json.Marshal(struct {
		APIVersion string `json:"apiVersion"`
		Name       string `json:"name"`
		Version    string `json:"version"`
		ChartMetadata
	}{"v2", name, version, meta})
	if err != nil {
		t.Fatal(err)
	}
	chart := HelmChart(t, name, version, nil)
	layers, err := chart.Layers()
	if err != nil {
		t.Fatal(err)
	}
	img, err := partial.CompressedToImage(chartWithConfig{config: config, layer: layers[0]})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// chartWithConfig is a chart of one layer whose config is config.
type chartWithConfig struct {
	config []byte
	layer  v1.Layer
}

func (c chartWithConfig) RawConfigFile() ([]byte, error) { return c.config, nil }

func (c chartWithConfig) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

func (c chartWithConfig) RawManifest() ([]byte, error) {
	configDigest, configSize, err := v1.SHA256(bytes.NewReader(c.config))
	if err != nil {
		return nil, err
	}
	layer, err := partial.Descriptor(c.layer)
	if err != nil {
		return nil, err
	}
	layer.MediaType = helmChartMediaType
	return json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: helmConfigMediaType, Digest: configDigest, Size: configSize},
		Layers:        []v1.Descriptor{*layer},
	})
}

func (c chartWithConfig) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := c.layer.Digest(); err == nil && d == h {
		return c.layer, nil
	}
	if configDigest, _, err := v1.SHA256(bytes.NewReader(c.config)); err == nil && configDigest == h {
		return static.NewLayer(c.config, helmConfigMediaType), nil
	}
	return nil, fmt.Errorf("the chart has no blob %s", h)
}
