package sourcekind

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/source"
)

func init() {
	register("githubReleases", func(spec uprevv1.ReleaseSourceSpec) Kind {
		if spec.GitHubReleases == nil {
			return nil
		}
		return githubReleases{*spec.GitHubReleases}
	})
}

// githubReleases reads the releases of a repository on GitHub or a server
// with GitHub's releases API.
type githubReleases struct {
	spec uprevv1.GitHubReleasesSource
}

// Short returns github.
func (githubReleases) Short() string { return "github" }

// URL returns the API's base URL, GitHub's when the spec names none.
func (g githubReleases) URL() string { return cmp.Or(g.spec.URL, forge.DefaultGitHubURL) }

// Describe names the repository and the API.
func (g githubReleases) Describe() string {
	return fmt.Sprintf("releases of %s at %s", g.spec.Repository, source.RedactURL(g.URL()))
}

// From names the repository, and the API when the spec names one.
func (g githubReleases) From() string {
	if g.spec.URL == "" {
		return g.spec.Repository
	}
	return g.spec.Repository + " at " + source.RedactURL(g.spec.URL)
}

// Check finds nothing to refuse: the API's validation covers the fields.
func (githubReleases) Check() error { return nil }

// List lists the repository's releases.
func (g githubReleases) List(ctx context.Context, c *source.Client, key string, access source.Access) (source.Listing, error) {
	return c.ListGitHubReleases(ctx, key, access, g.spec.URL, g.spec.Repository)
}

// GitHubApp returns the API's URL: the installation token goes to the
// releases API as a bearer token.
func (g githubReleases) GitHubApp() (string, bool, bool) { return g.URL(), true, true }

// Notified tells whether n is a release of the repository (owner/name
// compared without regard to case, as GitHub does).
func (g githubReleases) Notified(n Notification) bool {
	return n.Released != "" && strings.EqualFold(g.spec.Repository, n.Released)
}

// Notes has the releases of the repository between the two versions, read
// from the source's own API (as an image's are, notes.Fetcher.Releases)
// with the source's credentials, sent to that API's host only, and the
// repository's web page.
func (g githubReleases) Notes(ctx context.Context, c *notes.Change, r NotesReaders, _ string, access source.Access, old, new string) {
	api, web := g.releasesAPI(r.GitHub)
	c.Source = web
	releases, err := r.Fetcher.Releases(ctx, withSecret(api, access.Secret), web, old, new)
	if err != nil {
		c.Missing = err.Error()
	}
	c.Releases = releases
}

// releasesAPI is the API the source's releases are read from, and its
// repository's web address: github (GitHub's) when the source names no
// URL; a Gitea server's for a URL ending in /api/v1; else a GitHub
// Enterprise Server's.
func (g githubReleases) releasesAPI(github notes.API) (notes.API, string) {
	if g.spec.URL == "" {
		return github, "https://github.com/" + g.spec.Repository
	}
	root := strings.TrimSuffix(g.spec.URL, "/")
	if base, ok := strings.CutSuffix(root, "/api/v1"); ok {
		return notes.API{Kind: notes.Gitea, URL: base}, base + "/" + g.spec.Repository
	}
	base := strings.TrimSuffix(root, "/api/v3")
	return notes.API{Kind: notes.GitHub, URL: root}, base + "/" + g.spec.Repository
}
