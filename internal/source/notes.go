package source

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"text/template"

	repo "helm.sh/helm/v4/pkg/repo/v1"
)

// ChartAbout is what a repository index says of one version of a chart,
// for a reviewer: untrusted text, as the chart's author wrote it.
type ChartAbout struct {
	// Home is the chart's home page.
	Home string
	// Sources are the addresses of the chart's source code.
	Sources []string
	// Annotations are the chart's annotations, such as
	// artifacthub.io/changes.
	Annotations map[string]string
}

// HelmChartAbout reads, from the index.yaml of the classic Helm repository
// at repoURL, what the entry of version of chart says of it (its home,
// sources and annotations), with the credentials, deadline and bounds of
// a scan (ListHelmChart). The index is read in full and nothing of it is
// kept: the caller keeps what it needs. key names the source.
func (c *Client) HelmChartAbout(ctx context.Context, key string, access Access, repoURL, chart, version string) (ChartAbout, error) {
	ctx, cancel := access.withTimeout(ctx)
	defer cancel()
	base := strings.TrimSuffix(repoURL, "/") + "/"
	s, err := c.session(key, base, access)
	if err != nil {
		return ChartAbout{}, err
	}
	s.unremembered = true
	a, _, err := s.get(ctx, base+"index.yaml", chart, nil, func(_ *http.Response, body []byte) (answer, error) {
		var found *ChartAbout
		err := chartEntries(body, chart, func(cv *repo.ChartVersion) {
			if found == nil && cv != nil && cv.Metadata != nil && cv.Version == version {
				found = &ChartAbout{Home: cv.Home, Sources: cv.Sources, Annotations: cv.Annotations}
			}
		}, func() { found = nil })
		return answer{value: found}, err
	})
	if err != nil {
		return ChartAbout{}, err
	}
	found, _ := a.value.(*ChartAbout)
	if found == nil {
		return ChartAbout{}, fmt.Errorf("%w: version %q of chart %q is not in the repository's index", ErrNotListed, version, chart)
	}
	return *found, nil
}

// JSONNotes reads the notes of version in the JSON document at docURL,
// with the credentials, deadline and bounds of a scan (ListJSON): the
// value the JSONPath expression notesExpr names, a Go template of the
// version ({{.Version}}) such as
// {.releases[?(@.version=="{{.Version}}")].notes}. A string, a number,
// or a list of them (joined by lines) is the notes; nothing named is no
// notes (""). A version of other characters than letters, digits and
// . _ - + is not put in an expression. The document is read in full and
// nothing of it is kept. key names the source.
func (c *Client) JSONNotes(ctx context.Context, key string, access Access, docURL, notesExpr, version string) (string, error) {
	ctx, cancel := access.withTimeout(ctx)
	defer cancel()
	if !plainVersion(version) {
		return "", fmt.Errorf("%w: version %q has characters a JSONPath expression does not quote", ErrInvalidConfig, version)
	}
	expr, err := NotesJSONPath(notesExpr, version)
	if err != nil {
		return "", err
	}
	jp, err := ParseJSONPath(expr)
	if err != nil {
		return "", err
	}
	s, err := c.session(key, docURL, access)
	if err != nil {
		return "", err
	}
	s.unremembered = true
	a, _, err := s.get(ctx, docURL, "", map[string]string{"Accept": "application/json"}, parseJSONDocument)
	if err != nil {
		return "", err
	}
	jp.AllowMissingKeys(true)
	results, err := jp.FindResults(a.value)
	if err != nil {
		return "", fmt.Errorf("%w: JSONPath %q in %s: %w", ErrNotListed, expr, RedactURL(docURL), err)
	}
	var lines []string
	for _, group := range results {
		for _, v := range group {
			switch value := v.Interface().(type) {
			case string:
				lines = append(lines, value)
			case float64, json.Number, bool:
				lines = append(lines, fmt.Sprint(value))
			case []any:
				for _, item := range value {
					if s, ok := item.(string); ok {
						lines = append(lines, s)
					}
				}
			default:
				return "", fmt.Errorf("%w: JSONPath %q in %s names a %T, not text", ErrInvalidResponse, expr, RedactURL(docURL), value)
			}
		}
	}
	return strings.Join(lines, "\n"), nil
}

// NotesJSONPath expands the notes expression of an httpJSON source, a Go
// template of the version, for version. The error wraps
// ErrInvalidConfig.
func NotesJSONPath(tmpl, version string) (string, error) {
	t, err := template.New("notes").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", fmt.Errorf("%w: notes template %q: %w", ErrInvalidConfig, tmpl, err)
	}
	var b strings.Builder
	if err := t.Execute(&b, struct{ Version string }{version}); err != nil {
		return "", fmt.Errorf("%w: notes template %q: %w", ErrInvalidConfig, tmpl, err)
	}
	return b.String(), nil
}

// plainVersion says whether version is made of letters, digits and
// . _ - + only, at most 128 of them: safe inside a JSONPath string.
func plainVersion(version string) bool {
	if version == "" || len(version) > 128 {
		return false
	}
	for _, r := range version {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-+", r)
		if !ok {
			return false
		}
	}
	return true
}
