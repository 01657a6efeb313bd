package plan_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/plan"
	"github.com/uprev-dev/uprev/internal/source"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
)

// TestPlanNotesOfReleaseSources: a plan's notes have, for each
// ReleaseSource update, the notes its kind finds, as the pull request
// body has them: a githubReleases source's releases between the two
// versions from its own API, and, for a private one (whose Secret a local
// run does not read), why there are none.
func TestPlanNotesOfReleaseSources(t *testing.T) {
	g := NewWithT(t)
	api := githubapi.StartReleases(t)
	api.SetReleases("kubernetes/kubernetes",
		githubapi.Release{TagName: "v1.30.3", Body: "later"},
		githubapi.Release{TagName: "v1.30.2", HTMLURL: api.URL + "/kubernetes/kubernetes/releases/tag/v1.30.2", Body: "Fixes a @kubernetes/sig-node regression"},
		githubapi.Release{TagName: "v1.30.1", Body: "old"})
	private := githubapi.StartReleases(t)
	private.RequireToken("ghp_not-here")
	private.SetReleases("acme/cli", githubapi.Release{TagName: "v2.0.0", Body: "private"})

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"platform/components.yaml": "version: v1.30.1 # {\"$uprev\": \"fleet:kubernetes\"}\n",
		"platform/cli.yaml":        "version: v1.0.0 # {\"$uprev\": \"fleet:cli\"}\n",
	})
	releaseSource := func(name, version string, spec uprevv1.GitHubReleasesSource) uprevv1.ReleaseSource {
		return uprevv1.ReleaseSource{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name},
			Spec:       uprevv1.ReleaseSourceSpec{GitHubReleases: &spec, SecretRef: &meta.LocalObjectReference{Name: "github"}},
			Status: uprevv1.ReleaseSourceStatus{
				Conditions: []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason}},
				Latest:     &uprevv1.SourceVersion{Version: version},
			},
		}
	}
	sources := []uprevv1.ReleaseSource{
		releaseSource("kubernetes", "v1.30.2", uprevv1.GitHubReleasesSource{Repository: "kubernetes/kubernetes", URL: api.URL + "/api/v3"}),
		releaseSource("cli", "v2.0.0", uprevv1.GitHubReleasesSource{Repository: "acme/cli", URL: private.URL}),
	}
	policies, _, _ := guard.SourcesOf(sources)
	p, err := plan.Compute(context.Background(), plan.Input{Root: dir, DefaultNamespace: "fleet", Input: guard.Input{Policies: policies}})
	g.Expect(err).NotTo(HaveOccurred())

	got := p.Notes(context.Background(), plan.NotesInput{
		Fetcher:      notes.NewFetcher(outbound.Denylist{}.Client(5*time.Second), nil),
		Sources:      sources,
		SourceReader: source.NewClient(source.Options{}),
	})
	g.Expect(got).To(Equal("**ReleaseSource/fleet/cli: v1.0.0 --> v2.0.0**\n\n" +
		"- Source: " + private.URL + "/acme/cli\n" +
		"- No release notes: listing the releases of acme/cli: GET " + private.URL + "/api/v3/repos/acme/cli/releases?page=1&amp;per_page=100: 404 Not Found [].\n\n" +
		"**ReleaseSource/fleet/kubernetes: v1.30.1 --> v1.30.2**\n\n" +
		"- Source: " + api.URL + "/kubernetes/kubernetes\n\n" +
		"<details><summary>Release notes: 1 release</summary>\n\n" +
		"**[v1.30.2](" + api.URL + "/kubernetes/kubernetes/releases/tag/v1.30.2)**\n\n" +
		"> Fixes a @\u200bkubernetes/sig-node regression\n\n" +
		"</details>\n\n"))
	for _, r := range append(api.Requests(), private.Requests()...) {
		g.Expect(r.Header.Get("Authorization")).To(BeEmpty())
	}
}
