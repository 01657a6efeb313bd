package notes

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"sigs.k8s.io/yaml"
)

// Annotations of a Helm chart that Helm copies onto its OCI manifest (and
// a repository index keeps in its entries).
const (
	// ChangesAnnotation is Artifact Hub's list of the changes of a chart
	// version: strings, or {kind, description, links}.
	ChangesAnnotation = "artifacthub.io/changes"
	// HomeLabel is the chart's home (Chart.yaml home), as Helm writes it.
	HomeLabel = "org.opencontainers.image.url"
)

// chartChange is one entry of ChangesAnnotation in its structured form.
type chartChange struct {
	Kind        string `json:"kind"`
	Description string `json:"description"`
	Links       []struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	} `json:"links"`
}

// ChartChanges is the release of version that a chart's
// artifacthub.io/changes annotation describes, as Markdown bullets
// (untrusted: Render quotes and sanitizes it), or false when the
// annotation is empty or not a list.
func ChartChanges(annotation, version string) (Release, bool) {
	annotation = cutAtLine(annotation, MaxChangeBytes)
	var b strings.Builder
	var plain []string
	if err := yaml.Unmarshal([]byte(annotation), &plain); err == nil {
		for _, s := range plain {
			fmt.Fprintf(&b, "- %s\n", strings.TrimSpace(s))
		}
	} else {
		var entries []chartChange
		if err := yaml.Unmarshal([]byte(annotation), &entries); err != nil {
			return Release{}, false
		}
		for _, e := range entries {
			line := strings.TrimSpace(e.Description)
			if e.Kind != "" {
				line = e.Kind + ": " + line
			}
			for _, l := range e.Links {
				if u := webURL(l.URL); u != "" {
					line += fmt.Sprintf(" (%s: %s)", strings.TrimSpace(l.Name), u)
				}
			}
			fmt.Fprintf(&b, "- %s\n", line)
		}
	}
	if b.Len() == 0 {
		return Release{}, false
	}
	return Release{Tag: version, Name: version + " (" + ChangesAnnotation + ")", Body: b.String()}, true
}

// Chart is what a Helm chart's Chart.yaml says of one of its versions, as
// a classic repository's index gives it: untrusted text.
type Chart struct {
	// Home is the chart's home page.
	Home string
	// Sources are the addresses of its source code.
	Sources []string
	// Annotations are its annotations, of which ChangesAnnotation is read.
	Annotations map[string]string
}

// ChartNotes fills c with the notes of the update of a chart from old to
// new, whose Chart.yaml at new is chart: its home and sources, its
// ChangesAnnotation first in the notes, then the releases, between the two
// versions, of its first source, read from the API apiFor gives for it
// (as an OCI chart's, ImageNotes). What cannot be found is said in
// c.Missing; nothing fails.
func (f *Fetcher) ChartNotes(ctx context.Context, c *Change, chart Chart, old, new string, apiFor func(source string) API) {
	c.Home = chart.Home
	if len(chart.Sources) > 0 {
		c.Source, c.MoreSources = chart.Sources[0], chart.Sources[1:]
	}
	changes, hasChanges := ChartChanges(chart.Annotations[ChangesAnnotation], new)
	if hasChanges {
		c.Releases = []Release{changes}
	}
	if c.Source == "" {
		if !hasChanges {
			c.Missing = "the chart names no sources and has no " + ChangesAnnotation + " annotation"
		}
		return
	}
	f.sourceReleases(ctx, c, old, new, apiFor)
}

// DocumentNotes is the release of version whose notes a document gives
// (an httpJSON source's), body cut at a line within MaxChangeBytes;
// docURL, its link, is left out unless it is a plain web address.
func DocumentNotes(version, docURL, body string) Release {
	r := Release{Tag: version, Body: cutAtLine(body, MaxChangeBytes)}
	if u, err := url.Parse(docURL); err == nil && u.User == nil && u.RawQuery == "" {
		r.URL = webURL(docURL)
	}
	return r
}
