package notes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/uprev-dev/uprev/internal/registry"
)

// OCI annotations (and image labels) that say where an image comes from.
const (
	// SourceLabel names the repository an image is built from.
	SourceLabel = "org.opencontainers.image.source"
	// RevisionLabel names the commit it is built from.
	RevisionLabel = "org.opencontainers.image.revision"
	// HelmConfigMediaType is the media type of a Helm chart's config in an
	// OCI registry: its Chart.yaml, as JSON.
	HelmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
)

// Registry reads images: registry.Client, with the access of the image's
// ImageRepository.
type Registry interface {
	// Digest returns the digest tag of image points at.
	Digest(ctx context.Context, image, tag string) (string, error)
	// ReadArtifact reads image at digest.
	ReadArtifact(ctx context.Context, image, digest string, read func(v1.Image) error, opts ...registry.ArtifactOption) error
}

// ImageNotes fills c with the notes of the update of image from old to
// new: the releases, between the two versions, of the repository the new
// version's SourceLabel names, read from the API apiFor gives for it, and
// a link comparing the two versions' RevisionLabel. A Helm chart in an OCI
// registry carries its Chart.yaml there too, as Helm writes its manifest
// annotations: its home (HomeLabel), its first source (SourceLabel) and its
// annotations, whose ChangesAnnotation comes first in the notes; its other
// sources are read from its config, its Chart.yaml. What cannot be found
// is said in c.Missing; nothing fails.
func (f *Fetcher) ImageNotes(ctx context.Context, c *Change, reg Registry, image, old, new string, apiFor func(source string) API) {
	newLabels, chartSources, err := imageLabels(ctx, reg, image, new)
	if err != nil {
		c.Missing = "reading the image's labels: " + err.Error()
		return
	}
	c.Source = newLabels[SourceLabel]
	c.Home = newLabels[HomeLabel]
	for _, s := range chartSources {
		switch {
		case c.Source == "":
			c.Source = s
		case s != c.Source && !slices.Contains(c.MoreSources, s):
			c.MoreSources = append(c.MoreSources, s)
		}
	}
	changes, hasChanges := ChartChanges(newLabels[ChangesAnnotation], new)
	if hasChanges {
		c.Releases = []Release{changes}
	}
	if c.Source == "" {
		if !hasChanges {
			c.Missing = "the new version has no " + SourceLabel + " label or annotation"
		}
		return
	}
	// The old version may be gone: no compare link then.
	oldLabels, _, _ := imageLabels(ctx, reg, image, old)
	c.CompareURL = CompareURL(c.Source, oldLabels[RevisionLabel], newLabels[RevisionLabel])
	f.sourceReleases(ctx, c, old, new, apiFor)
}

// sourceReleases adds to c the releases of c.Source after old up to new,
// read from the API apiFor gives for it; a failure is said in c.Missing.
func (f *Fetcher) sourceReleases(ctx context.Context, c *Change, old, new string, apiFor func(source string) API) {
	releases, err := f.Releases(ctx, apiFor(c.Source), c.Source, old, new)
	if err != nil {
		c.Missing = err.Error()
	}
	c.Releases = append(c.Releases, releases...)
}

// imageLabels returns the config labels and the manifest annotations of
// tag of image (annotations win) and, for a Helm chart, the sources its
// config (its Chart.yaml) names.
func imageLabels(ctx context.Context, reg Registry, image, tag string) (labels map[string]string, chartSources []string, err error) {
	digest, err := reg.Digest(ctx, image, tag)
	if err != nil {
		return nil, nil, fmt.Errorf("%s:%s: %w", image, tag, err)
	}
	labels = map[string]string{}
	err = reg.ReadArtifact(ctx, image, digest, func(img v1.Image) error {
		m, err := img.Manifest()
		if err != nil {
			return err
		}
		if m.Config.MediaType == HelmConfigMediaType {
			chartSources, err = helmChartSources(img)
		} else {
			err = configLabels(img, labels)
		}
		if err != nil {
			return err
		}
		for k, v := range m.Annotations {
			labels[k] = v
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s:%s: %w", image, tag, err)
	}
	return labels, chartSources, nil
}

// configLabels adds the labels of img's config to labels.
func configLabels(img v1.Image, labels map[string]string) error {
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	for k, v := range cfg.Config.Labels {
		labels[k] = v
	}
	return nil
}

// helmChartSources are the sources of a Helm chart's config, its
// Chart.yaml as JSON.
func helmChartSources(img v1.Image) ([]string, error) {
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, err
	}
	var chart struct {
		Sources []string `json:"sources"`
	}
	if err := json.Unmarshal(raw, &chart); err != nil {
		return nil, fmt.Errorf("reading the chart's config: %w", err)
	}
	return chart.Sources, nil
}
