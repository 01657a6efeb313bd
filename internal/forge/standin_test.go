package forge_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/gitlabapi"
)

const token = "secret-token-never-shown"

// spec is the pull request of the push branch uprev/updates into main.
func spec(body string) forge.PullRequestSpec {
	return forge.PullRequestSpec{Head: "uprev/updates", Base: "main", Title: "Update agent to 1.1.0", Body: body,
		Labels: []string{"automated", "uprev"}, Reviewers: []string{"alice"}}
}

func newForge(t *testing.T, cfg forge.Config) forge.Forge {
	t.Helper()
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = outbound.Denylist(nil).Client(30 * time.Second)
	}
	f, err := forge.New(cfg)
	if err != nil {
		t.Fatalf("forge.New: %v", err)
	}
	return f
}

// TestGitHubPullRequestLifecycle: the first call opens a pull request with
// labels and reviewers, the next updates the same one, and once it is
// closed or merged the next call opens a new one and leaves the old one
// as it is.
func TestGitHubPullRequestLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := githubapi.StartRepository(t, "acme", "fleet", token)
	gh := newForge(t, forge.Config{Provider: forge.GitHub, URL: repo.URL, Repository: "acme/fleet", Token: token})

	pr, err := gh.EnsurePullRequest(ctx, spec("first"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr).To(Equal(forge.PullRequest{Number: 1, URL: "https://github.com/acme/fleet/pull/1", State: forge.StateOpen, Created: true}))

	pr, err = gh.EnsurePullRequest(ctx, spec("second"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Number).To(BeEquivalentTo(1))
	g.Expect(pr.Created).To(BeFalse())
	prs := repo.PullRequests()
	g.Expect(prs).To(HaveLen(1))
	g.Expect(prs[0]).To(And(HaveField("Body", "second"), HaveField("Title", "Update agent to 1.1.0"),
		HaveField("Head", "uprev/updates"), HaveField("Base", "main"),
		HaveField("Labels", ConsistOf("automated", "uprev")), HaveField("RequestedReviewers", ConsistOf("alice"))))

	repo.Close(1)
	closedAt := len(repo.Calls())
	pr, err = gh.EnsurePullRequest(ctx, spec("third"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr).To(And(HaveField("Number", BeEquivalentTo(2)), HaveField("Created", true)))

	repo.Merge(2)
	pr, err = gh.EnsurePullRequest(ctx, spec("fourth"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Number).To(BeEquivalentTo(3))

	prs = repo.PullRequests()
	g.Expect(prs).To(HaveLen(3))
	g.Expect(prs[0]).To(And(HaveField("State", "closed"), HaveField("Body", "second")), "a closed pull request is never reopened nor edited")
	g.Expect(prs[1]).To(And(HaveField("State", "closed"), HaveField("Merged", true), HaveField("Body", "third")))
	g.Expect(prs[2]).To(And(HaveField("State", "open"), HaveField("Body", "fourth")))
	for _, call := range repo.Calls()[closedAt:] {
		g.Expect(call).NotTo(HaveSuffix("/pulls/1"), "the closed pull request is not touched once closed")
	}
}

// TestGitHubErrorsAreReported: a server error and an exhausted rate limit
// come back as APIErrors with the status, the wait GitHub asked for, and
// never the token; the call after them succeeds.
func TestGitHubErrorsAreReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := githubapi.StartRepository(t, "acme", "fleet", token)
	cfg := forge.Config{Provider: forge.GitHub, URL: repo.URL, Repository: "acme/fleet", Token: token}

	repo.Fail(1, http.StatusInternalServerError)
	_, err := newForge(t, cfg).EnsurePullRequest(ctx, spec("body"))
	var apiErr *forge.APIError
	g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
	g.Expect(apiErr.StatusCode).To(Equal(http.StatusInternalServerError))
	g.Expect(apiErr.RateLimited).To(BeFalse())
	g.Expect(err.Error()).To(ContainSubstring("listing open pull requests: HTTP 500"))
	g.Expect(err.Error()).NotTo(ContainSubstring(token))

	repo.RateLimit(time.Hour)
	_, err = newForge(t, cfg).EnsurePullRequest(ctx, spec("body"))
	g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
	g.Expect(apiErr.RateLimited).To(BeTrue())
	g.Expect(apiErr.RetryAfter).To(BeNumerically("~", time.Hour, time.Minute))
	g.Expect(err.Error()).To(ContainSubstring("rate limited"))
	g.Expect(err.Error()).NotTo(ContainSubstring(token))

	// The wait is reckoned on the forge's own time (its Date header): a
	// manager whose clock runs 20 minutes ahead still waits the hour the
	// forge asks, not 40 minutes.
	repo.RateLimit(time.Hour)
	later := cfg
	later.Clock = clocktesting.NewFakePassiveClock(time.Now().Add(20 * time.Minute))
	_, err = newForge(t, later).EnsurePullRequest(ctx, spec("body"))
	g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
	g.Expect(apiErr.RetryAfter).To(BeNumerically("~", time.Hour, time.Minute))

	_, err = newForge(t, forge.Config{Provider: forge.GitHub, URL: repo.URL, Repository: "acme/fleet", Token: "wrong"}).EnsurePullRequest(ctx, spec("body"))
	g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
	g.Expect(apiErr.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(repo.PullRequests()).To(BeEmpty())

	pr, err := newForge(t, cfg).EnsurePullRequest(ctx, spec("body"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Number).To(BeEquivalentTo(1))
}

// TestGitLabMergeRequestLifecycle: the same rules on GitLab, with the
// project's path URL-encoded, reviewers looked up by user name and labels
// added.
func TestGitLabMergeRequestLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	project := gitlabapi.Start(t, "platform/team/fleet", token, map[string]int64{"alice": 7})
	gl := newForge(t, forge.Config{Provider: forge.GitLab, URL: project.URL, Repository: "platform/team/fleet", Token: token})

	pr, err := gl.EnsurePullRequest(ctx, spec("first"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr).To(Equal(forge.PullRequest{Number: 1, URL: project.URL + "/platform/team/fleet/-/merge_requests/1", State: forge.StateOpen, Created: true}))

	pr, err = gl.EnsurePullRequest(ctx, spec("second"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr).To(And(HaveField("Number", BeEquivalentTo(1)), HaveField("Created", false)))
	mrs := project.MergeRequests()
	g.Expect(mrs).To(HaveLen(1))
	g.Expect(mrs[0]).To(And(HaveField("Description", "second"), HaveField("SourceBranch", "uprev/updates"),
		HaveField("TargetBranch", "main"), HaveField("Labels", ConsistOf("automated", "uprev")), HaveField("ReviewerIDs", ConsistOf(int64(7)))))

	project.Merge(1)
	pr, err = gl.EnsurePullRequest(ctx, spec("third"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr).To(And(HaveField("Number", BeEquivalentTo(2)), HaveField("Created", true)))
	project.Close(2)
	pr, err = gl.EnsurePullRequest(ctx, spec("fourth"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Number).To(BeEquivalentTo(3))
	mrs = project.MergeRequests()
	g.Expect(mrs[0]).To(And(HaveField("State", "merged"), HaveField("Description", "second")))
	g.Expect(mrs[1]).To(And(HaveField("State", "closed"), HaveField("Description", "third")), "a closed merge request is never reopened")
	g.Expect(mrs[2]).To(And(HaveField("State", "opened"), HaveField("Description", "fourth")))

	_, err = gl.EnsurePullRequest(ctx, forge.PullRequestSpec{Head: "x", Base: "main", Title: "t", Reviewers: []string{"nobody"}})
	g.Expect(err).To(MatchError(ContainSubstring(`no GitLab user "nobody"`)))
}

// TestGitLabErrorsAreReported: GitLab's 429 with Retry-After and a 502 are
// reported at once, not retried inside the client, without the token.
func TestGitLabErrorsAreReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	project := gitlabapi.Start(t, "group/fleet", token, nil)
	gl := newForge(t, forge.Config{Provider: forge.GitLab, URL: project.URL, Repository: "group/fleet", Token: token})
	s := spec("body")
	s.Reviewers = nil

	project.RateLimit(90 * time.Second)
	_, err := gl.EnsurePullRequest(ctx, s)
	var apiErr *forge.APIError
	g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
	g.Expect(apiErr).To(And(HaveField("StatusCode", http.StatusTooManyRequests), HaveField("RateLimited", true),
		HaveField("RetryAfter", 90*time.Second)))
	g.Expect(err.Error()).NotTo(ContainSubstring(token))
	g.Expect(project.Calls()).To(HaveLen(1), "the client does not retry by itself")

	project.Fail(1, http.StatusBadGateway)
	_, err = gl.EnsurePullRequest(ctx, s)
	g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
	g.Expect(apiErr.StatusCode).To(Equal(http.StatusBadGateway))
	g.Expect(project.MergeRequests()).To(BeEmpty())

	pr, err := gl.EnsurePullRequest(ctx, s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Number).To(BeEquivalentTo(1))
}

// TestNewRefusesWhatCannotWork: configurations that cannot work are
// ErrInvalidConfig.
func TestNewRefusesWhatCannotWork(t *testing.T) {
	client := outbound.Denylist(nil).Client(time.Second)
	for _, cfg := range []forge.Config{
		{Provider: forge.GitHub, Repository: "fleet", HTTPClient: client},
		{Provider: forge.GitHub, Repository: "acme/team/fleet", HTTPClient: client},
		{Provider: forge.Gitea, Repository: "acme/fleet", HTTPClient: client},
		{Provider: "bitbucket", Repository: "acme/fleet", HTTPClient: client},
		{Provider: forge.GitHub, Repository: "acme/fleet"}, // no client of the outbound layer
	} {
		_, err := forge.New(cfg)
		NewWithT(t).Expect(err).To(MatchError(forge.ErrInvalidConfig), "%+v", cfg)
	}
}
