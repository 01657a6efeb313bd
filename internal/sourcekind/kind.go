// Package sourcekind holds the kinds of ReleaseSource, one file each: where
// a source's versions come from (a Helm repository's index, GitHub
// releases, Git tags, a JSON feed), how its server is named in messages
// and tables without credentials, what a GitHub App exchanges a token
// for, and which webhook notifications concern it. Of is the one place
// that looks at which field of a ReleaseSourceSpec is set; a new kind is
// one new file that registers itself.
//
// It lives beside internal/source, not in it: internal/source reads the
// protocols and knows nothing of the API's types, while a kind maps the
// API's spec onto it (and onto internal/gitrepo for Git tags). Errors
// come out as the engines' sentinels, or as a *FieldError or *GitError, so
// that a controller keeps the mapping to condition reasons.
package sourcekind

import (
	"context"
	"fmt"
	"slices"
	"strings"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/source"
)

// Kind is one kind of ReleaseSource: where its versions come from.
type Kind interface {
	// Short names the kind in a word (helm, github, git, json): the CLI's
	// KIND column.
	Short() string
	// URL is the URL of the source's server: its host owns the source's
	// credentials and keys the source's share of the workers.
	URL() string
	// Describe names what the source reads, for messages; URLs are
	// redacted.
	Describe() string
	// From names what the source reads, for the CLI's FROM column; URLs
	// are redacted.
	From() string
	// Check returns a *FieldError for what cannot work as written (such as
	// a JSONPath that does not parse), before anything is read.
	Check() error
	// List lists the source's versions, with the client c for HTTP kinds
	// (key names the source in c's memory of earlier answers) and the
	// credentials, certificates and timeout of access.
	List(ctx context.Context, c *source.Client, key string, access source.Access) (source.Listing, error)
	// GitHubApp tells whether a GitHub App authenticates the source
	// (ok), the URL whose host its installation token is for, and whether
	// the token goes as a bearer token (an API) rather than as the
	// password of x-access-token (Git over HTTPS).
	GitHubApp() (url string, bearer bool, ok bool)
	// Notified tells whether a webhook notification concerns the source,
	// so that it is scanned at once.
	Notified(n Notification) bool
	// Notes fills c with what a pull request body says of the source's
	// update from old to new: its release notes, links, or why there are
	// none (c.Missing), read with the credentials, certificates and
	// timeout of access, each answer read once per change (key names the
	// source, as for List). Nothing here fails.
	Notes(ctx context.Context, c *notes.Change, r NotesReaders, key string, access source.Access, old, new string)
}

// Notification is what a webhook told of a Git server, in plain values.
type Notification struct {
	// TagsPushed tells whether the notification is a push of tags (or a
	// push naming no ref) to the repository at a Git URL; nil when it is
	// no such push.
	TagsPushed func(repoURL string) bool
	// Released is the owner/name of the repository whose release the
	// notification is about; empty when it is no release.
	Released string
}

// FieldError is a field of a ReleaseSource's spec that cannot work as
// written; its message starts with the field's path.
type FieldError struct {
	// Field is the field's path, such as spec.httpJSON.versions.
	Field string
	// Err is what is wrong with it.
	Err error
}

// Error returns the field's path and what is wrong with it.
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns what is wrong with the field.
func (e *FieldError) Unwrap() error { return e.Err }

// registration is one kind: the spec field that selects it and how to
// read it from a spec.
type registration struct {
	// field is the spec field's JSON name, such as helmRepository.
	field string
	// of returns the kind of spec, or nil when field is not set.
	of func(spec uprevv1.ReleaseSourceSpec) Kind
}

// kinds are the registered kinds, by their fields' names.
var kinds []registration

// register adds a kind, selected by the spec field of the JSON name field;
// of returns nil when that field is not set. Each kind's file registers
// itself from its init function.
func register(field string, of func(spec uprevv1.ReleaseSourceSpec) Kind) {
	kinds = append(kinds, registration{field: field, of: of})
	slices.SortFunc(kinds, func(a, b registration) int { return strings.Compare(a.field, b.field) })
}

// Of returns the kind of spec: the one of its kind fields that is set. A
// spec that sets none, or more than one, is a *FieldError of spec.
func Of(spec uprevv1.ReleaseSourceSpec) (Kind, error) {
	var found []Kind
	for _, r := range kinds {
		if k := r.of(spec); k != nil {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		fields := make([]string, len(kinds))
		for i, r := range kinds {
			fields[i] = r.field
		}
		last := len(fields) - 1
		return nil, &FieldError{Field: "spec", Err: fmt.Errorf("exactly one of %s and %s must be set",
			strings.Join(fields[:last], ", "), fields[last])}
	}
	return found[0], nil
}
