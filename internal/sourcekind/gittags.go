package sourcekind

import (
	"context"
	"net/url"
	"strings"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/source"
)

func init() {
	register("gitTags", func(spec uprevv1.ReleaseSourceSpec) Kind {
		if spec.GitTags == nil {
			return nil
		}
		return gitTags{*spec.GitTags}
	})
}

// GitError is an error of listing a Git repository's tags. It wraps
// gitrepo's sentinels (ErrInvalidSecret, ErrAuthentication, ErrTimeout,
// ErrListingTooLarge, ...) and outbound.ErrDenied, to be sorted as any Git
// operation's errors are rather than as an HTTP source's.
type GitError struct {
	// Err is the Git operation's error.
	Err error
}

// Error returns the Git operation's error message.
func (e *GitError) Error() string { return e.Err.Error() }

// Unwrap returns the Git operation's error.
func (e *GitError) Unwrap() error { return e.Err }

// gitTags reads the tags of a Git repository, by one listing of its
// references.
type gitTags struct {
	spec uprevv1.GitTagsSource
}

// Short returns git.
func (gitTags) Short() string { return "git" }

// URL returns the repository's URL.
func (g gitTags) URL() string { return g.spec.URL }

// Describe names the repository.
func (g gitTags) Describe() string { return "tags of " + source.RedactURL(g.spec.URL) }

// From names the repository.
func (g gitTags) From() string { return source.RedactURL(g.spec.URL) }

// Check finds nothing to refuse: the URL is checked as it is read, with
// the Secret's credentials.
func (gitTags) Check() error { return nil }

// List lists the repository's tags with the Secret's credentials and the
// certificate Secret's ca.crt, reached as every Git repository is
// (gitrepo.Access); c is not used (Git has its own transport). Every error
// is a *GitError, a URL Git cannot read one wrapping gitrepo.ErrInvalidURL.
func (g gitTags) List(ctx context.Context, _ *source.Client, _ string, access source.Access) (source.Listing, error) {
	remote, err := gitrepo.Access{
		URL:     g.spec.URL,
		Field:   "spec.gitTags.url",
		Secret:  access.Secret,
		CACert:  access.CertSecret[gitrepo.SecretCACert],
		Timeout: access.Timeout,
	}.Remote(ctx)
	if err != nil {
		return source.Listing{}, &GitError{Err: err}
	}
	listing, err := source.ListGitTags(ctx, remote)
	if err != nil {
		return source.Listing{}, &GitError{Err: err}
	}
	return listing, nil
}

// GitHubApp returns the repository's URL: the installation token goes as
// the password of x-access-token.
func (g gitTags) GitHubApp() (string, bool, bool) { return g.spec.URL, false, true }

// Notified tells whether n is a push of tags to the repository.
func (g gitTags) Notified(n Notification) bool {
	return n.TagsPushed != nil && n.TagsPushed(g.spec.URL)
}

// Notes has the link that compares the two tags on the repository's web
// page (https:// repositories only): Git tags publish no notes, so nothing
// is read.
func (g gitTags) Notes(_ context.Context, c *notes.Change, _ NotesReaders, _ string, _ source.Access, old, new string) {
	c.Source = gitWebURL(g.spec.URL)
	c.CompareURL = notes.CompareTagsURL(c.Source, old, new)
	c.Missing = "a gitTags source publishes no release notes; the compare link shows what changed"
}

// gitWebURL is the web address of an https Git repository (its URL
// without .git), or "" for other schemes or a URL with credentials.
func gitWebURL(gitURL string) string {
	u, err := url.Parse(gitURL)
	if err != nil || u.Scheme != "https" || u.User != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSuffix(gitURL, "/"), ".git")
}
