package notes

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// TestChartChanges: Artifact Hub's changes annotation, as strings or as
// {kind, description, links}, is a release of the chart's version; links
// that are not web addresses are dropped; what is not a list is no notes.
func TestChartChanges(t *testing.T) {
	r, ok := ChartChanges("- Add a PodDisruptionBudget\n- Fix the probe's port\n", "2.1.0")
	if !ok || r.Body != "- Add a PodDisruptionBudget\n- Fix the probe's port\n" || r.Name != "2.1.0 (artifacthub.io/changes)" {
		t.Errorf("strings: %+v %v", r, ok)
	}
	r, ok = ChartChanges(`- kind: security
  description: Bump the image for CVE-2026-1
  links:
    - name: GHSA
      url: https://github.com/advisories/GHSA-xxxx
    - name: evil
      url: "javascript:alert(1)"
- kind: added
  description: "@team values"
`, "2.1.0")
	if !ok || r.Body != "- security: Bump the image for CVE-2026-1 (GHSA: https://github.com/advisories/GHSA-xxxx)\n- added: @team values\n" {
		t.Errorf("structured: %q %v", r.Body, ok)
	}
	checkInert(t, Render([]Change{{Title: "chart", Releases: []Release{r}}}, MaxBodyChars))
	for _, bad := range []string{"", "just text", "{a: b}"} {
		if _, ok := ChartChanges(bad, "1.0.0"); ok {
			t.Errorf("%q gave notes", bad)
		}
	}
}

// TestOCIChartNotes: a Helm chart in an OCI registry, with the manifest
// annotations Helm writes from its Chart.yaml (home, first source, and the
// chart's annotations), has the changes annotation first, then the
// releases of its source between the two versions, and its home.
func TestOCIChartNotes(t *testing.T) {
	reg := testregistry.Start(t)
	const source = "https://github.com/acme/charts"
	push := func(version string, annotations map[string]string) {
		chart := testregistry.HelmChart(t, "agent", version, nil)
		reg.Push(t, "charts/agent", version, mutate.Annotations(chart, annotations).(v1.Image))
	}
	push("2.0.0", map[string]string{SourceLabel: source})
	push("2.1.0", map[string]string{SourceLabel: source, HomeLabel: "https://agent.example", ChangesAnnotation: "- Add a PodDisruptionBudget\n"})
	gh := githubapi.StartReleases(t)
	gh.SetReleases("acme/charts", githubapi.Release{TagName: "2.1.0", Body: "chart 2.1.0"}, githubapi.Release{TagName: "2.0.0", Body: "old"})
	c := chartNotes(t, reg, gh.URL)
	var got []string
	for _, r := range c.Releases {
		got = append(got, r.Name+"="+strings.TrimSpace(r.Body))
	}
	if want := "2.1.0 (artifacthub.io/changes)=- Add a PodDisruptionBudget|=chart 2.1.0"; strings.Join(got, "|") != want || c.Missing != "" {
		t.Errorf("releases %q, missing %q; want %q", strings.Join(got, "|"), c.Missing, want)
	}
	if c.Home != "https://agent.example" || c.Source != source {
		t.Errorf("home %q, source %q", c.Home, c.Source)
	}
	if out := Render([]Change{c}, MaxBodyChars); !strings.Contains(out, "- Home: https://agent.example\n- Source: "+source+"\n") {
		t.Errorf("rendered without home and source:\n%s", out)
	}
}

// TestOCIChartNotesReadEverySource: a chart as `helm push` stores it names
// its first source in an annotation and all in its config (its
// Chart.yaml); the notes show every one, the first once, and read the
// releases of the first.
func TestOCIChartNotesReadEverySource(t *testing.T) {
	reg := testregistry.Start(t)
	const source, mirror = "https://github.com/acme/charts", "https://git.example/acme/agent"
	push := func(version string) {
		chart := testregistry.HelmChartAsPushed(t, "agent", version, testregistry.ChartMetadata{Sources: []string{source, mirror, source}})
		reg.Push(t, "charts/agent", version, mutate.Annotations(chart, map[string]string{SourceLabel: source}).(v1.Image))
	}
	push("2.0.0")
	push("2.1.0")
	gh := githubapi.StartReleases(t)
	gh.SetReleases("acme/charts", githubapi.Release{TagName: "2.1.0", Body: "chart 2.1.0"}, githubapi.Release{TagName: "2.0.0", Body: "old"})
	c := chartNotes(t, reg, gh.URL)
	if c.Source != source || strings.Join(c.MoreSources, " ") != mirror || c.Missing != "" {
		t.Errorf("source %q, more sources %q, missing %q; want %q and %q", c.Source, c.MoreSources, c.Missing, source, mirror)
	}
	want := "- Source: " + source + "\n- Source: " + mirror + "\n"
	if out := Render([]Change{c}, MaxBodyChars); !strings.Contains(out, want) || strings.Count(out, "- Source: ") != 2 || !strings.Contains(out, "chart 2.1.0") {
		t.Errorf("rendered:\n%s\nwant its sources as\n%s", out, want)
	}
}

// chartNotes are the notes of charts/agent of reg from 2.0.0 to 2.1.0,
// its releases read from the GitHub API at apiURL.
func chartNotes(t *testing.T, reg *testregistry.Registry, apiURL string) Change {
	t.Helper()
	client, err := registry.NewScanner(registry.ScannerOptions{}).Client(context.Background(), registry.Access{})
	if err != nil {
		t.Fatal(err)
	}
	f := NewFetcher(outbound.Denylist{}.Client(5*time.Second), nil)
	c := Change{Title: "charts"}
	f.ImageNotes(context.Background(), &c, client, reg.Image("charts/agent"), "2.0.0", "2.1.0", func(string) API { return API{URL: apiURL} })
	return c
}
