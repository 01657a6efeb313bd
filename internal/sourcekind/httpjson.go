package sourcekind

import (
	"context"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
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

// Check refuses an expression outside the JSONPath subset uprev reads.
func (j httpJSON) Check() error {
	if _, err := source.ParseJSONPath(j.spec.Versions); err != nil {
		return &FieldError{Field: "spec.httpJSON.versions", Err: err}
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
