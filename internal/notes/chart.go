package notes

import (
	"fmt"
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
