package controllers

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/notes"
)

// sourceNotes is what the body says of the update u of the ReleaseSource
// rs: for githubReleases, the releases between the two versions of its
// repository, read from its own API as an image's are (without the
// source's credentials); for gitTags, the link that compares the two
// tags. Helm repositories and httpJSON documents give no notes yet.
func (r *UpdateAutomationReconciler) sourceNotes(ctx context.Context, rs *uprevv1.ReleaseSource, u forge.Update) notes.Change {
	c := notes.Change{Title: fmt.Sprintf("%s: %s --> %s", u.Policy, u.Old, u.New)}
	switch {
	case rs.Spec.GitHubReleases != nil:
		api, web := r.releasesAPI(rs.Spec.GitHubReleases)
		c.Source = web
		var err error
		if c.Releases, err = r.Notes.Releases(ctx, api, web, u.Old, u.New); err != nil {
			c.Missing = err.Error()
		}
	case rs.Spec.GitTags != nil:
		c.Source = gitWebURL(rs.Spec.GitTags.URL)
		c.CompareURL = notes.CompareTagsURL(c.Source, u.Old, u.New)
		c.Missing = "a gitTags source publishes no release notes; the compare link shows what changed"
	default:
		c.Missing = "release notes are read from githubReleases sources, and images' sources, only"
	}
	return c
}

// releasesAPI is the API a githubReleases source is read from, and its
// repository's web address: GitHub's (public, or r.GitHubReleases) when
// the source names no URL; a Gitea server's for a URL ending in /api/v1;
// else a GitHub Enterprise Server's.
func (r *UpdateAutomationReconciler) releasesAPI(s *uprevv1.GitHubReleasesSource) (notes.API, string) {
	if s.URL == "" {
		return r.GitHubReleases, "https://github.com/" + s.Repository
	}
	root := strings.TrimSuffix(s.URL, "/")
	if base, ok := strings.CutSuffix(root, "/api/v1"); ok {
		return notes.API{Kind: notes.Gitea, URL: base}, base + "/" + s.Repository
	}
	base := strings.TrimSuffix(root, "/api/v3")
	return notes.API{Kind: notes.GitHub, URL: root}, base + "/" + s.Repository
}

// gitWebURL is the web address of an https Git repository (its URL
// without .git), or "" for other schemes.
func gitWebURL(gitURL string) string {
	u, err := url.Parse(gitURL)
	if err != nil || u.Scheme != "https" || u.User != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSuffix(gitURL, "/"), ".git")
}
