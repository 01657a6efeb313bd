package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestSourceNotes: a ReleaseSource's update in a pull request body has
// the releases of its githubReleases repository between the two versions,
// read from the source's own API (a GitHub Enterprise stand-in here), and
// its repository's page; a gitTags source has the link comparing the two
// tags; a helmRepository source says it has no notes.
func TestSourceNotes(t *testing.T) {
	rel := githubapi.StartReleases(t)
	rel.SetReleases("acme/cli",
		githubapi.Release{TagName: "v2.1.0", HTMLURL: rel.URL + "/acme/cli/releases/tag/v2.1.0", Body: "two one"},
		githubapi.Release{TagName: "v2.0.0", HTMLURL: rel.URL + "/acme/cli/releases/tag/v2.0.0", Body: "two"},
		githubapi.Release{TagName: "v1.9.0", Body: "old"})
	r := &UpdateAutomationReconciler{Notes: notes.NewFetcher(outbound.Denylist{}.Client(5*time.Second), nil)}
	ctx := context.Background()
	u := forge.Update{Policy: "ReleaseSource/team-a/cli", Old: "1.9.0", New: "2.1.0"}

	c := r.sourceNotes(ctx, &uprevv1.ReleaseSource{Spec: uprevv1.ReleaseSourceSpec{
		GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "acme/cli", URL: rel.URL + "/api/v3"}}}, u)
	if c.Missing != "" || len(c.Releases) != 2 || c.Releases[0].Body != "two one" || c.Releases[1].Body != "two" {
		t.Errorf("githubReleases: %+v", c)
	}
	if c.Source != rel.URL+"/acme/cli" || c.Title != "ReleaseSource/team-a/cli: 1.9.0 --> 2.1.0" {
		t.Errorf("githubReleases source %q, title %q", c.Source, c.Title)
	}

	c = r.sourceNotes(ctx, &uprevv1.ReleaseSource{Spec: uprevv1.ReleaseSourceSpec{
		GitTags: &uprevv1.GitTagsSource{URL: "https://git.example/acme/cli.git"}}}, forge.Update{Policy: u.Policy, Old: "v1.9.0", New: "v2.1.0"})
	if c.CompareURL != "https://git.example/acme/cli/compare/v1.9.0...v2.1.0" || c.Source != "https://git.example/acme/cli" || len(c.Releases) != 0 {
		t.Errorf("gitTags: %+v", c)
	}
	c = r.sourceNotes(ctx, &uprevv1.ReleaseSource{Spec: uprevv1.ReleaseSourceSpec{
		GitTags: &uprevv1.GitTagsSource{URL: "ssh://git@git.example/acme/cli.git"}}}, u)
	if c.CompareURL != "" || c.Source != "" {
		t.Errorf("gitTags over ssh has no web page to link: %+v", c)
	}

	c = r.sourceNotes(ctx, &uprevv1.ReleaseSource{Spec: uprevv1.ReleaseSourceSpec{
		HelmRepository: &uprevv1.HelmRepositorySource{URL: "https://charts.example", Chart: "agent"}}}, u)
	if c.Missing == "" || len(c.Releases) != 0 {
		t.Errorf("helmRepository: %+v", c)
	}
}
