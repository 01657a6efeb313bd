package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/source"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestSourceNotes: a ReleaseSource's update in a pull request body has
// the releases of its githubReleases repository between the two versions,
// read from the source's own API (a GitHub Enterprise stand-in here), and
// its repository's page; a gitTags source has the link comparing the two
// tags. (Each kind's notes: internal/sourcekind's tests.)
func TestSourceNotes(t *testing.T) {
	rel := githubapi.StartReleases(t)
	rel.SetReleases("acme/cli",
		githubapi.Release{TagName: "v2.1.0", HTMLURL: rel.URL + "/acme/cli/releases/tag/v2.1.0", Body: "two one"},
		githubapi.Release{TagName: "v2.0.0", HTMLURL: rel.URL + "/acme/cli/releases/tag/v2.0.0", Body: "two"},
		githubapi.Release{TagName: "v1.9.0", Body: "old"})
	r := &UpdateAutomationReconciler{Notes: notes.NewFetcher(outbound.Denylist{}.Client(5*time.Second), nil), Sources: source.NewClient(source.Options{})}
	ctx := context.Background()
	u := forge.Update{Policy: "ReleaseSource/team-a/cli", Old: "1.9.0", New: "2.1.0"}

	c := r.sourceNotes(ctx, &uprevv1.ReleaseSource{Spec: uprevv1.ReleaseSourceSpec{
		GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "acme/cli", URL: rel.URL + "/api/v3"}}}, u, notes.API{})
	if c.Missing != "" || len(c.Releases) != 2 || c.Releases[0].Body != "two one" || c.Releases[1].Body != "two" {
		t.Errorf("githubReleases: %+v", c)
	}
	if c.Source != rel.URL+"/acme/cli" || c.Title != "ReleaseSource/team-a/cli: 1.9.0 --> 2.1.0" {
		t.Errorf("githubReleases source %q, title %q", c.Source, c.Title)
	}

	c = r.sourceNotes(ctx, &uprevv1.ReleaseSource{Spec: uprevv1.ReleaseSourceSpec{
		GitTags: &uprevv1.GitTagsSource{URL: "https://git.example/acme/cli.git"}}}, forge.Update{Policy: u.Policy, Old: "v1.9.0", New: "v2.1.0"}, notes.API{})
	if c.CompareURL != "https://git.example/acme/cli/compare/v1.9.0...v2.1.0" || c.Source != "https://git.example/acme/cli" || len(c.Releases) != 0 {
		t.Errorf("gitTags: %+v", c)
	}
	c = r.sourceNotes(ctx, &uprevv1.ReleaseSource{Spec: uprevv1.ReleaseSourceSpec{
		GitTags: &uprevv1.GitTagsSource{URL: "ssh://git@git.example/acme/cli.git"}}}, u, notes.API{})
	if c.CompareURL != "" || c.Source != "" {
		t.Errorf("gitTags over ssh has no web page to link: %+v", c)
	}
}

// TestSourceNotesWithTheSourcesSecret: the notes of a private
// githubReleases source are read with the token of the source's Secret,
// as its scans are (the stand-in answers an anonymous request 404, as
// GitHub does for a private repository); a Secret whose token the API
// refuses gives no notes, and the body says why without the token.
func TestSourceNotesWithTheSourcesSecret(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	rel := githubapi.StartReleases(t)
	const token = "ghp_private-notes"
	rel.RequireToken(token)
	rel.SetReleases("acme/private", githubapi.Release{TagName: "v2.0.0", Body: "private notes"}, githubapi.Release{TagName: "v1.0.0"})
	for name, value := range map[string]string{"good": token, "bad": "ghp_revoked-token"} {
		g.Expect(k8s.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data: map[string][]byte{"bearerToken": []byte(value)}})).To(Succeed())
	}
	r := &UpdateAutomationReconciler{Notes: notes.NewFetcher(outbound.Denylist{}.Client(5*time.Second), nil), Sources: source.NewClient(source.Options{})}
	r.Client = k8s
	rs := func(secret string) *uprevv1.ReleaseSource {
		ref := metaRef(secret)
		return &uprevv1.ReleaseSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "private-" + secret}, Spec: uprevv1.ReleaseSourceSpec{
			GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "acme/private", URL: rel.URL}, SecretRef: &ref}}
	}
	u := forge.Update{Policy: "ReleaseSource/" + ns + "/private", Old: "v1.0.0", New: "v2.0.0"}

	c := r.sourceNotes(t.Context(), rs("good"), u, notes.API{})
	g.Expect(c.Missing).To(BeEmpty())
	g.Expect(c.Releases).To(HaveExactElements(HaveField("Body", "private notes")))

	c = r.sourceNotes(t.Context(), rs("bad"), u, notes.API{})
	g.Expect(c.Releases).To(BeEmpty())
	g.Expect(c.Missing).To(ContainSubstring("401 Bad credentials"))
	body := notes.Render([]notes.Change{c}, notes.MaxBodyChars)
	g.Expect(body).To(ContainSubstring("- No release notes: listing the releases of acme/private:"))
	g.Expect(body).NotTo(ContainSubstring("revoked"))
	for _, req := range rel.Requests() {
		g.Expect(req.Header.Get("Authorization")).To(BeElementOf("Bearer "+token, "Bearer ghp_revoked-token"))
	}
}
