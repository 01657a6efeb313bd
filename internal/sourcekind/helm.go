package sourcekind

import (
	"context"
	"fmt"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/source"
)

func init() {
	register("helmRepository", func(spec uprevv1.ReleaseSourceSpec) Kind {
		if spec.HelmRepository == nil {
			return nil
		}
		return helmRepository{*spec.HelmRepository}
	})
}

// helmRepository reads the versions of a chart from a classic Helm
// repository's index.yaml.
type helmRepository struct {
	spec uprevv1.HelmRepositorySource
}

// Short returns helm.
func (helmRepository) Short() string { return "helm" }

// URL returns the repository's URL.
func (h helmRepository) URL() string { return h.spec.URL }

// Describe names the chart and the repository.
func (h helmRepository) Describe() string {
	return fmt.Sprintf("chart %s of %s", h.spec.Chart, source.RedactURL(h.spec.URL))
}

// From names the chart and the repository.
func (h helmRepository) From() string {
	return h.spec.Chart + " in " + source.RedactURL(h.spec.URL)
}

// Check finds nothing to refuse: the API's validation covers the fields.
func (helmRepository) Check() error { return nil }

// List lists the chart's versions in the repository's index.
func (h helmRepository) List(ctx context.Context, c *source.Client, key string, access source.Access) (source.Listing, error) {
	return c.ListHelmChart(ctx, key, access, h.spec.URL, h.spec.Chart)
}

// GitHubApp returns false: a GitHub App does not authenticate a Helm
// repository.
func (helmRepository) GitHubApp() (string, bool, bool) { return "", false, false }

// Notified returns false: no webhook notification names a chart.
func (helmRepository) Notified(Notification) bool { return false }

// Notes has what the index's entry of the new version says of it (as an
// OCI chart's manifest does, notes.Fetcher.ChartNotes): its
// artifacthub.io/changes first, its home and sources, and the releases of
// its first source between the two versions. The index is read with the
// source's credentials, once per new version.
func (h helmRepository) Notes(ctx context.Context, c *notes.Change, r NotesReaders, key string, access source.Access, old, new string) {
	about, err := r.Fetcher.Remember(rememberKey("helm", access, h.spec.URL, h.spec.Chart, new), func() (any, error) {
		return r.Sources.HelmChartAbout(ctx, key, access, h.spec.URL, h.spec.Chart, new)
	})
	if err != nil {
		c.Missing = "reading the chart's entry in the repository's index: " + err.Error()
		return
	}
	a, _ := about.(source.ChartAbout)
	r.Fetcher.ChartNotes(ctx, c, notes.Chart{Home: a.Home, Sources: a.Sources, Annotations: a.Annotations}, old, new, r.APIFor)
}
