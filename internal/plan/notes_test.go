package plan_test

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/plan"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/update"
)

// TestPlanNotes: a plan's notes are what the pull request body would say of
// its image updates: what the ReleaseGates checked of the new version, as
// their status says, the newer version they refused, the source and
// compare links from the image's labels, and the releases between the two
// versions, newest first, inert.
func TestPlanNotes(t *testing.T) {
	reg := testregistry.Start(t)
	const source = "https://github.com/acme/agent"
	for tag, revision := range map[string]string{"1.0.0": "1111111aaaaaaa", "1.2.0": "2222222bbbbbbb"} {
		img, err := mutate.Config(testregistry.ImageOf(t, testregistry.Layer(t, testregistry.Tar(t, map[string]string{"v": tag}))),
			v1.Config{Labels: map[string]string{notes.SourceLabel: source, notes.RevisionLabel: revision}})
		if err != nil {
			t.Fatal(err)
		}
		reg.Push(t, "acme/agent", tag, img)
	}
	image := reg.Image("acme/agent")
	gh := githubapi.StartReleases(t)
	gh.SetReleases("acme/agent",
		githubapi.Release{TagName: "v1.3.0", Body: "later"},
		githubapi.Release{TagName: "v1.2.0", HTMLURL: source + "/releases/tag/v1.2.0", Body: "Fixes #7, thanks @dev"},
		githubapi.Release{TagName: "v1.1.0", HTMLURL: source + "/releases/tag/v1.1.0", Body: "arm64"},
		githubapi.Release{TagName: "v1.0.0", Body: "old"})

	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	commit(t, dir, "fleet", map[string]string{"apps/agent.yaml": "image: " + image + ":1.0.0 # {\"$imagepolicy\": \"fleet:agent\"}\n"})
	p, err := plan.Compute(context.Background(), plan.Input{Root: dir, Input: guard.Input{
		Policies: map[update.PolicyKey]guard.Policy{key("fleet", "agent"): {Ref: ref(image, "1.2.0", "")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	since := metav1.NewTime(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	gates := []uprevv1.ReleaseGate{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "prod"},
		Status: uprevv1.ReleaseGateStatus{Policies: []uprevv1.GatedPolicy{{
			Name: "agent",
			Latest: &uprevv1.GatedVersion{Tag: "1.2.0", SignedBy: "key cosign.pub",
				Promoted: []uprevv1.PromotedTarget{{Sync: "staging", Target: "eu-staging", HealthySince: since}}},
			Waiting: []uprevv1.WaitingVersion{{Tag: "1.3.0", Gate: "verify", Reason: "unsigned"}},
		}}},
	}, {ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "prod"}}}
	scanner := registry.NewScanner(registry.ScannerOptions{})
	got := p.Notes(context.Background(), plan.NotesInput{
		Fetcher: notes.NewFetcher(outbound.Denylist{}.Client(5*time.Second), nil),
		Registry: func(ctx context.Context, _ string) (notes.Registry, error) {
			return scanner.Client(ctx, registry.Access{})
		},
		GitHub: notes.API{URL: gh.URL},
		Gates:  gates,
	})
	want := "**fleet/agent: 1.0.0 --> 1.2.0**\n\n" +
		"- Signature: verified by ReleaseGate `prod`, key cosign.pub\n" +
		"- Promotion: runs healthy on `eu-staging` of Sync `staging` since 2026-11-27T09:00:00Z (ReleaseGate `prod`)\n" +
		"- Refused: newer version `1.3.0`, by ReleaseGate `prod` (verify): unsigned\n" +
		"- Source: https://github.com/acme/agent\n" +
		"- Compare: https://github.com/acme/agent/compare/1111111aaaaaaa...2222222bbbbbbb\n\n" +
		"<details><summary>Release notes: 2 releases</summary>\n\n" +
		"**[v1.2.0](https://github.com/acme/agent/releases/tag/v1.2.0)**\n\n" +
		"> Fixes #\u200b7, thanks @\u200bdev\n\n" +
		"**[v1.1.0](https://github.com/acme/agent/releases/tag/v1.1.0)**\n\n" +
		"> arm64\n\n" +
		"</details>\n\n"
	if got != want {
		t.Errorf("notes:\n%s\nwant:\n%s", got, want)
	}
	if n := len(gh.Requests()); n != 1 {
		t.Errorf("%d release pages read, want 1", n)
	}
	if strings.Contains(got, "other") {
		t.Errorf("a gate of another namespace spoke: %s", got)
	}
}
