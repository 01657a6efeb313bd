package controllers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/sourcekind"
)

// sourceNotes is what the body says of the update u of the ReleaseSource
// rs, as its kind finds it (sourcekind.Kind.Notes): githubReleases'
// releases between the two versions, gitTags' compare link, the chart
// metadata of a Helm repository's index entry, an httpJSON document's
// notes. They are read with the source's own credentials (its Secret, or
// its GitHub App's token), sent to the source's host only; a chart's
// source repository is read as an image's (api). What cannot be read is
// said in the notes, never with a credential.
func (r *UpdateAutomationReconciler) sourceNotes(ctx context.Context, rs *uprevv1.ReleaseSource, u forge.Update, api notes.API) notes.Change {
	c := notes.Change{Title: fmt.Sprintf("%s: %s --> %s", u.Policy, u.Old, u.New)}
	kind, err := sourcekind.Of(rs.Spec)
	if err != nil {
		c.Missing = err.Error()
		return c
	}
	access, err := sourceAccess(ctx, r.Client, r.TokenCache, rs, kind)
	if err != nil {
		c.Missing = "reading the source's credentials: " + err.Error()
		return c
	}
	readers := sourcekind.NotesReaders{Fetcher: r.Notes, Sources: r.Sources, GitHub: r.GitHubReleases,
		APIFor: func(source string) notes.API { return notesAPI(source, api, r.GitHubReleases) }}
	kind.Notes(ctx, &c, readers, client.ObjectKeyFromObject(rs).String(), access, u.Old, u.New)
	return c
}
