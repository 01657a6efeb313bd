package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/source"
	"github.com/uprev-dev/uprev/internal/sourcekind"
	"github.com/uprev-dev/uprev/internal/update"
)

// NotesInput is what the notes of a plan are found with, as the
// UpdateAutomation controller finds those of a pull request.
type NotesInput struct {
	// Fetcher reads the release notes (through the outbound layer).
	Fetcher *notes.Fetcher
	// Registry returns a client that reads image (for a local run, with
	// the caller's own access).
	Registry func(ctx context.Context, image string) (notes.Registry, error)
	// GitHub is the API serving the releases of sources on github.com;
	// gitlab.com's is notes.GitLabAPI. Sources on other hosts get no notes.
	GitHub notes.API
	// Gates are the ReleaseGates whose status says what they checked.
	Gates []uprevv1.ReleaseGate
	// Sources are the ReleaseSources whose updates the notes of their kind
	// are found for (sourcekind.Kind.Notes), read anonymously: a local run
	// does not read their Secrets, so a private source's notes are left
	// out, saying why.
	Sources []uprevv1.ReleaseSource
	// SourceReader reads the Helm repository indexes and JSON documents
	// of Sources (through the outbound layer).
	SourceReader *source.Client
}

// Notes returns the Markdown a pull request body gives the updates of p:
// per image policy and version, what its ReleaseGates checked and the
// release notes between the two versions; per ReleaseSource, the notes of
// its kind; within the body's bounds.
func (p *Plan) Notes(ctx context.Context, in NotesInput) string {
	var changes []notes.Change
	seen := map[string]bool{}
	for _, e := range p.Changes {
		oldTag, newTag := tagOf(e.Old), tagOf(e.New)
		key := e.Policy.String() + " " + oldTag + " " + newTag
		if seen[key] {
			continue
		}
		seen[key] = true
		c := notes.Change{Title: fmt.Sprintf("%s: %s --> %s", e.Policy, oldTag, newTag)}
		if e.Policy.Kind == update.SourceKind {
			in.sourceNotes(ctx, &c, e.Policy, oldTag, newTag)
			changes = append(changes, c)
			continue
		}
		c.Checked = notes.GateChecks(gatesOf(in.Gates, e.Policy.Namespace), e.Policy.Name, newTag, nil)
		reg, err := in.Registry(ctx, e.Image)
		if err != nil {
			c.Missing = "reading the image's labels: " + err.Error()
		} else {
			in.Fetcher.ImageNotes(ctx, &c, reg, e.Image, oldTag, newTag, in.apiFor)
		}
		changes = append(changes, c)
	}
	return notes.Render(changes, notes.MaxBodyChars)
}

// sourceNotes fills c with the notes of the update of the ReleaseSource
// key from old to new, as the controller finds them, without the source's
// credentials.
func (in NotesInput) sourceNotes(ctx context.Context, c *notes.Change, key update.PolicyKey, old, new string) {
	i := slices.IndexFunc(in.Sources, func(rs uprevv1.ReleaseSource) bool {
		return rs.Namespace == key.Namespace && rs.Name == key.Name
	})
	if i < 0 {
		c.Missing = "the ReleaseSource was not read"
		return
	}
	rs := in.Sources[i]
	kind, err := sourcekind.Of(rs.Spec)
	if err != nil {
		c.Missing = err.Error()
		return
	}
	access := source.Access{}
	if rs.Spec.Timeout != nil {
		access.Timeout = rs.Spec.Timeout.Duration
	}
	readers := sourcekind.NotesReaders{Fetcher: in.Fetcher, Sources: in.SourceReader, GitHub: in.GitHub, APIFor: in.apiFor}
	kind.Notes(ctx, c, readers, rs.Namespace+"/"+rs.Name, access, old, new)
}

// apiFor is the API of a source's releases for a local run: GitHub's and
// gitlab.com's public ones.
func (in NotesInput) apiFor(source string) notes.API {
	switch notes.SourceHost(source) {
	case "github.com":
		return in.GitHub
	case "gitlab.com":
		return notes.GitLabAPI
	}
	return notes.API{}
}

// gatesOf returns the gates of namespace.
func gatesOf(gates []uprevv1.ReleaseGate, namespace string) []uprevv1.ReleaseGate {
	var out []uprevv1.ReleaseGate
	for _, g := range gates {
		if g.Namespace == namespace {
			out = append(out, g)
		}
	}
	return out
}

// tagOf is the tag of a plan's version (tag, or tag@digest).
func tagOf(version string) string {
	tag, _, _ := strings.Cut(version, "@")
	return tag
}
