package sourcekind

import (
	"context"
	"strings"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/source"
)

func init() {
	register("httpJSON", func(spec uprevv1.ReleaseSourceSpec) Kind {
		if spec.HTTPJSON == nil {
			return nil
		}
		return httpJSON{*spec.HTTPJSON}
	})
}

// httpJSON reads versions out of a JSON document by a JSONPath expression.
type httpJSON struct {
	spec uprevv1.HTTPJSONSource
}

// Short returns json.
func (httpJSON) Short() string { return "json" }

// URL returns the document's URL.
func (j httpJSON) URL() string { return j.spec.URL }

// Describe names the document.
func (j httpJSON) Describe() string { return source.RedactURL(j.spec.URL) }

// From names the document and the expression.
func (j httpJSON) From() string { return source.RedactURL(j.spec.URL) + " " + j.spec.Versions }

// Check refuses an expression (versions, notes) outside the JSONPath
// subset uprev reads, or a notes template that does not expand.
func (j httpJSON) Check() error {
	if _, err := source.ParseJSONPath(j.spec.Versions); err != nil {
		return &FieldError{Field: "spec.httpJSON.versions", Err: err}
	}
	if j.spec.Notes == "" {
		return nil
	}
	expr, err := source.NotesJSONPath(j.spec.Notes, "1.0.0")
	if err == nil {
		_, err = source.ParseJSONPath(expr)
	}
	if err != nil {
		return &FieldError{Field: "spec.httpJSON.notes", Err: err}
	}
	return nil
}

// List lists the versions the expression names in the document.
func (j httpJSON) List(ctx context.Context, c *source.Client, key string, access source.Access) (source.Listing, error) {
	return c.ListJSON(ctx, key, access, j.spec.URL, j.spec.Versions)
}

// GitHubApp returns false: a GitHub App does not authenticate a feed.
func (httpJSON) GitHubApp() (string, bool, bool) { return "", false, false }

// Notified returns false: no webhook notification names a feed.
func (httpJSON) Notified(Notification) bool { return false }

// Notes has the notes the document gives the new version (spec.notes),
// read with the source's credentials once per new version, cut to
// notes.MaxChangeBytes; none when the source has no notes expression.
func (j httpJSON) Notes(ctx context.Context, c *notes.Change, r NotesReaders, key string, access source.Access, _, new string) {
	if j.spec.Notes == "" {
		c.Missing = "the source names no notes in its document (spec.httpJSON.notes)"
		return
	}
	found, err := r.Fetcher.Remember(rememberKey("json", access, j.spec.URL, j.spec.Notes, new), func() (any, error) {
		text, err := r.Sources.JSONNotes(ctx, key, access, j.spec.URL, j.spec.Notes, new)
		return notes.DocumentNotes(new, j.spec.URL, text), err
	})
	switch release, _ := found.(notes.Release); {
	case err != nil:
		c.Missing = "reading the notes in " + source.RedactURL(j.spec.URL) + ": " + err.Error()
	case strings.TrimSpace(release.Body) == "":
		c.Missing = "the document has no notes for " + new
	default:
		c.Releases = []notes.Release{release}
	}
}
