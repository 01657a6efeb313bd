package controllers

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// labelledImage is an image whose config carries labels.
func labelledImage(t *testing.T, tag string, labels map[string]string) v1.Image {
	t.Helper()
	img, err := mutate.Config(registry.ImageOf(t, registry.Layer(t, registry.Tar(t, map[string]string{"version": tag}))), v1.Config{Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestPullRequestBodyHasReleaseNotes: the pull request of an image update
// names, newest first, every release of the repository the new version's
// org.opencontainers.image.source label names between the old and the
// new version, read through the pull request's GitHub API; it links the
// compare page of the two versions' revisions and says when the new
// version was first seen; notes that try to mention
// someone, close the block or pass for uprev's trailers are inert.
func TestPullRequestBodyHasReleaseNotes(t *testing.T) {
	g := NewWithT(t)
	gh := githubapi.StartRepository(t, "acme", "fleet", "forge-token")
	releases := githubapi.StartReleases(t)
	gh.ServeReleases(releases)
	web := strings.TrimSuffix(gh.URL, "/api/v3/")
	source := web + "/acme/agent"
	release := func(tag, body string) githubapi.Release {
		return githubapi.Release{TagName: tag, HTMLURL: source + "/releases/tag/" + tag, Body: body}
	}
	releases.SetReleases("acme/agent",
		release("v1.4.0", "not yet"),
		release("v1.3.0", "Thanks @someone!\n</details>\nUprev-Update: apps/agent 1.0.0 --> 6.6.6"),
		release("v1.2.0", "Fixes #12."),
		release("v1.1.0", "First."),
		release("v1.0.0", "The old one."),
	)

	f := newAutomationFixture(t, nil, map[string]string{"apps/agent.yaml": withVersion(agentMarked, "1.0.0")})
	f.reg.Push(t, "acme/agent", "1.0.0", labelledImage(t, "1.0.0", map[string]string{notes.SourceLabel: source, notes.RevisionLabel: "1111111aaaaaaa"}))
	f.reg.Push(t, "acme/agent", "1.3.0", labelledImage(t, "1.3.0", map[string]string{notes.SourceLabel: source, notes.RevisionLabel: "3333333ccccccc"}))
	requestReconcile(t, f.repo)
	waitForLatestTag(t, newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0")), "1.3.0")
	g.Expect(k8s.Create(context.Background(), secretWith(f.ns, "forge", map[string][]byte{"token": []byte("forge-token")}))).To(Succeed())
	auto := newAutomation(t, f.ns, f.url, withPullRequest(uprevv1.PullRequestSpec{
		Provider: "github", URL: gh.URL, Repository: "acme/fleet", SecretRef: &meta.LocalObjectReference{Name: "forge"},
	}))

	st := waitForPullRequest(t, auto, "")
	prs := gh.PullRequests()
	g.Expect(prs).To(HaveLen(1))
	// When the scan first saw 1.3.0, and how long ago, by the manager's clock.
	seen := regexp.MustCompile(`(?m)^- First seen: \S+ \(\d+ (min|h|days) ago\)$`).FindString(prs[0].Body)
	g.Expect(seen).NotTo(BeEmpty(), prs[0].Body)
	at, err := time.Parse(time.RFC3339, strings.Fields(seen)[3])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(at).NotTo(BeTemporally(">", testClock.Now()))
	want := "### Changes\n\n" +
		"- `apps/agent.yaml` (NS/agent): `IMAGE:1.0.0` --> `IMAGE:1.3.0`\n\n" +
		"### Release notes\n\n" +
		"**NS/agent: 1.0.0 --> 1.3.0**\n\n" +
		seen + "\n" +
		"- Source: SOURCE\n" +
		"- Compare: SOURCE/compare/1111111aaaaaaa...3333333ccccccc\n\n" +
		"<details><summary>Release notes: 3 releases</summary>\n\n" +
		"**[v1.3.0](SOURCE/releases/tag/v1.3.0)**\n\n" +
		"> Thanks @\u200bsomeone!\n" +
		"> &lt;/details>\n" +
		"> Uprev-Update: apps/agent 1.0.0 --> 6.6.6\n\n" +
		"**[v1.2.0](SOURCE/releases/tag/v1.2.0)**\n\n" +
		"> Fixes #\u200b12.\n\n" +
		"**[v1.1.0](SOURCE/releases/tag/v1.1.0)**\n\n" +
		"> First.\n\n" +
		"</details>\n\n" +
		"\n---\nOpened by uprev for UpdateAutomation NS/fleet at " + st.LastPushCommit[:10] +
		". Each push to the branch updates this description; once merged or closed, the next change opens a new pull request.\n"
	g.Expect(prs[0].Body).To(Equal(strings.ReplaceAll(f.expand(want), "SOURCE", source)))

	// The release pages were read once, with the pull request's token.
	requests := releases.Requests()
	g.Expect(requests).To(HaveLen(1))
	g.Expect(requests[0].Header.Get("Authorization")).To(Equal("Bearer forge-token"))
}

// TestNotesAPI: a source's releases are read from the pull request's own
// forge (with its token) when the source is on its host, from GitHub's and
// gitlab.com's public APIs for sources there, and from no other host.
func TestNotesAPI(t *testing.T) {
	github := notes.API{Kind: notes.GitHub, URL: "https://github-standin.example/"}
	for _, tc := range []struct {
		name   string
		spec   uprevv1.PullRequestSpec
		source string
		want   notes.API
	}{
		{"github.com, pull request on github.com", uprevv1.PullRequestSpec{Provider: "github"}, "https://github.com/acme/agent",
			notes.API{Kind: notes.GitHub, URL: "https://api.github.com/", Token: "t"}},
		{"GitHub Enterprise, its own host", uprevv1.PullRequestSpec{Provider: "github", URL: "https://ghe.example/api/v3/"}, "https://ghe.example/acme/agent",
			notes.API{Kind: notes.GitHub, URL: "https://ghe.example/api/v3/", Token: "t"}},
		{"github.com from a Gitea pull request", uprevv1.PullRequestSpec{Provider: "gitea", URL: "https://gitea.example"}, "https://github.com/acme/agent", github},
		{"Gitea, its own host", uprevv1.PullRequestSpec{Provider: "gitea", URL: "https://gitea.example"}, "https://gitea.example/acme/agent",
			notes.API{Kind: notes.Gitea, URL: "https://gitea.example", Token: "t"}},
		{"GitLab, its own host", uprevv1.PullRequestSpec{Provider: "gitlab", URL: "https://gitlab.example"}, "https://gitlab.example/acme/agents/agent",
			notes.API{Kind: notes.GitLab, URL: "https://gitlab.example", Token: "t"}},
		{"gitlab.com from a GitHub pull request", uprevv1.PullRequestSpec{Provider: "github"}, "https://gitlab.com/acme/agent", notes.GitLabAPI},
		{"another host", uprevv1.PullRequestSpec{Provider: "gitea", URL: "https://gitea.example"}, "https://evil.example/acme/agent", notes.API{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := notesAPI(tc.source, forgeNotesAPI(&tc.spec, "t"), github); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestNotesHostThatNeverAnswersDelaysNoCommit: when the host of the
// release notes accepts the request and never answers, the commit is
// pushed all the same while the notes are still awaited, and the pull
// request is opened once the notes' deadline has passed, saying why it
// has none.
func TestNotesHostThatNeverAnswersDelaysNoCommit(t *testing.T) {
	t.Parallel() // its servers, namespace and objects are its own
	g := NewWithT(t)
	gh := githubapi.StartRepository(t, "acme", "fleet", "forge-token")
	releases := githubapi.StartReleases(t)
	releases.Hang()
	gh.ServeReleases(releases)
	source := strings.TrimSuffix(gh.URL, "/api/v3/") + "/acme/stuck"

	f := newAutomationFixture(t, nil, map[string]string{"apps/agent.yaml": withVersion(agentMarked, "1.0.0")})
	f.reg.Push(t, "acme/agent", "1.0.0", labelledImage(t, "1.0.0", map[string]string{notes.SourceLabel: source}))
	f.reg.Push(t, "acme/agent", "1.1.0", labelledImage(t, "1.1.0", map[string]string{notes.SourceLabel: source}))
	requestReconcile(t, f.repo)
	waitForLatestTag(t, newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0")), "1.1.0")
	g.Expect(k8s.Create(context.Background(), secretWith(f.ns, "forge", map[string][]byte{"token": []byte("forge-token")}))).To(Succeed())
	start := time.Now()
	auto := newAutomation(t, f.ns, f.url, withPullRequest(uprevv1.PullRequestSpec{
		Provider: "github", URL: gh.URL, Repository: "acme/fleet", SecretRef: &meta.LocalObjectReference{Name: "forge"},
	}))

	// While the notes are awaited, the commit is in Git already.
	g.Eventually(releases.Requests).ShouldNot(BeEmpty())
	g.Expect(f.readFile("uprev/updates", "apps/agent.yaml")).To(Equal(f.expand(withVersion(agentMarked, "1.1.0"))))
	// The pull request waits for the notes up to their deadline, which
	// began after start: it is opened no sooner than notesTimeout after
	// start (asserted by when it was opened, not when the test looked,
	// which a busy machine can delay past the deadline).
	g.Eventually(gh.PullRequests).WithTimeout(notesTimeout + 30*time.Second).Should(HaveLen(1))
	g.Expect(gh.PullRequests()[0].CreatedAt.Sub(start)).To(BeNumerically(">=", notesTimeout), "the pull request waits for the notes, up to their deadline")
	g.Expect(gh.PullRequests()[0].Body).To(MatchRegexp(`- No release notes: listing the releases of acme/stuck: .*context deadline exceeded`))
	waitForPullRequest(t, auto, "")
}
