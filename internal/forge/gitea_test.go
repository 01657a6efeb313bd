package forge_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"

	giteasdk "code.gitea.io/sdk/gitea"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/testenv/gitea"
)

// pushToBranch commits a new file to branch of the administrator's fleet
// repository, creating the branch from main the first time.
func pushToBranch(t *testing.T, c *giteasdk.Client, owner, branch, path, content string, create bool) {
	t.Helper()
	opts := giteasdk.CreateFileOptions{FileOptions: giteasdk.FileOptions{BranchName: branch, Message: "Change " + path},
		Content: base64.StdEncoding.EncodeToString([]byte(content))}
	if create {
		opts.BranchName, opts.NewBranchName = "main", branch
	}
	if _, _, err := c.CreateFile(owner, "fleet", path, opts); err != nil {
		t.Fatalf("committing %s to %s: %v", path, branch, err)
	}
}

// TestGiteaPullRequestLifecycle runs against a real Gitea: a pull request
// is opened with labels (created on the way) and a reviewer, updated in
// place, and after it is closed, and again after one is merged, the next
// call opens a new one; neither closed one is reopened.
func TestGiteaPullRequestLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := gitea.Start(t)
	srv.CreateRepo(t, "fleet", "main", map[string]string{"apps/agent.yaml": "image: acme/agent:1.0.0\n"})
	srv.CreateUser(t, "alice", "fleet")
	c := srv.Client(t)
	pushToBranch(t, c, srv.Admin, "uprev/updates", "apps/one.yaml", "image: acme/agent:1.1.0\n", true)
	f := newForge(t, forge.Config{Provider: forge.Gitea, URL: srv.URL, Repository: srv.Admin + "/fleet", Token: srv.Token})

	first, err := f.EnsurePullRequest(ctx, spec("first"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first).To(And(HaveField("Created", true), HaveField("State", forge.StateOpen),
		HaveField("URL", srv.URL+srv.Admin+"/fleet/pulls/1"), HaveField("Number", BeEquivalentTo(1))))

	again, err := f.EnsurePullRequest(ctx, spec("second"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(And(HaveField("Created", false), HaveField("Number", first.Number)))
	pr, _, err := c.GetPullRequest(srv.Admin, "fleet", first.Number)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.Title).To(Equal("Update agent to 1.1.0"))
	g.Expect(pr.Body).To(Equal("second"))
	g.Expect(pr.Head.Ref).To(Equal("uprev/updates"))
	g.Expect(pr.Base.Ref).To(Equal("main"))
	var labels []string
	for _, l := range pr.Labels {
		labels = append(labels, l.Name)
	}
	g.Expect(labels).To(ConsistOf("automated", "uprev"), "labels are created and set once")
	var reviewers []string
	for _, u := range pr.RequestedReviewers {
		reviewers = append(reviewers, u.UserName)
	}
	g.Expect(reviewers).To(ConsistOf("alice"))

	closed := giteasdk.StateClosed
	_, _, err = c.EditPullRequest(srv.Admin, "fleet", first.Number, giteasdk.EditPullRequestOption{State: &closed})
	g.Expect(err).NotTo(HaveOccurred())
	pushToBranch(t, c, srv.Admin, "uprev/updates", "apps/two.yaml", "image: acme/agent:1.2.0\n", false)
	second, err := f.EnsurePullRequest(ctx, spec("third"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second).To(And(HaveField("Created", true), HaveField("Number", BeNumerically(">", first.Number))))

	srv.MergePullRequest(t, "fleet", second.Number)
	pushToBranch(t, c, srv.Admin, "uprev/updates", "apps/three.yaml", "image: acme/agent:1.3.0\n", false)
	third, err := f.EnsurePullRequest(ctx, spec("fourth"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(third).To(And(HaveField("Created", true), HaveField("Number", BeNumerically(">", second.Number))))

	for n, want := range map[int64]struct {
		state  giteasdk.StateType
		merged bool
		body   string
	}{first.Number: {giteasdk.StateClosed, false, "second"}, second.Number: {giteasdk.StateClosed, true, "third"}, third.Number: {giteasdk.StateOpen, false, "fourth"}} {
		pr, _, err := c.GetPullRequest(srv.Admin, "fleet", n)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pr.State).To(Equal(want.state), "#%d", n)
		g.Expect(pr.HasMerged).To(Equal(want.merged), "#%d", n)
		g.Expect(pr.Body).To(Equal(want.body), "#%d is never edited once closed", n)
	}
}

// TestGiteaRefusedTokenIsReported: a token Gitea does not know is an
// APIError 401 whose message does not hold it.
func TestGiteaRefusedTokenIsReported(t *testing.T) {
	g := NewWithT(t)
	srv := gitea.Start(t)
	srv.CreateRepo(t, "fleet", "main", nil)
	const wrong = "0123456789abcdef0123456789abcdef01234567"
	f := newForge(t, forge.Config{Provider: forge.Gitea, URL: srv.URL, Repository: srv.Admin + "/fleet", Token: wrong})
	_, err := f.EnsurePullRequest(context.Background(), spec("body"))
	var apiErr *forge.APIError
	g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
	g.Expect(apiErr.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(err.Error()).NotTo(ContainSubstring(wrong))
}
