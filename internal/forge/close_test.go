package forge_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/testenv/gitea"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/gitlabapi"
)

// expectCloses checks f's ClosePullRequest: with no open pull request of
// the branch it finds none; it closes the open one, without merging it,
// and then finds none again; a merged one is left merged.
func expectCloses(t *testing.T, f forge.Forge, state func(number int64) string, merge func(number int64)) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	_, found, err := f.ClosePullRequest(ctx, "uprev/updates", "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "nothing open yet")

	opened, err := f.EnsurePullRequest(ctx, spec("to close"))
	g.Expect(err).NotTo(HaveOccurred())
	closed, found, err := f.ClosePullRequest(ctx, "uprev/updates", "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(closed).To(Equal(forge.PullRequest{Number: opened.Number, URL: opened.URL, State: forge.StateClosed}))
	g.Expect(state(opened.Number)).To(Equal("closed"))
	_, found, err = f.ClosePullRequest(ctx, "uprev/updates", "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "a closed one is not found again")

	merged, err := f.EnsurePullRequest(ctx, spec("merged"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(merged.Created).To(BeTrue())
	merge(merged.Number)
	_, found, err = f.ClosePullRequest(ctx, "uprev/updates", "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "a merged one is left merged")
	g.Expect(state(merged.Number)).To(Equal("merged"))
}

// TestGitHubClosePullRequest: on the GitHub stand-in.
func TestGitHubClosePullRequest(t *testing.T) {
	repo := githubapi.StartRepository(t, "acme", "fleet", token)
	f := newForge(t, forge.Config{Provider: forge.GitHub, URL: repo.URL, Repository: "acme/fleet", Token: token})
	state := func(n int64) string {
		for _, p := range repo.PullRequests() {
			switch {
			case int64(p.Number) == n && p.Merged:
				return "merged"
			case int64(p.Number) == n:
				return p.State
			}
		}
		return ""
	}
	expectCloses(t, f, state, func(n int64) { repo.Merge(int(n)) })
}

// TestGitLabClosePullRequest: on the GitLab stand-in, merge requests.
func TestGitLabClosePullRequest(t *testing.T) {
	project := gitlabapi.Start(t, "group/fleet", token, map[string]int64{"alice": 7})
	f := newForge(t, forge.Config{Provider: forge.GitLab, URL: project.URL, Repository: "group/fleet", Token: token})
	state := func(n int64) string {
		for _, mr := range project.MergeRequests() {
			if mr.IID == n {
				return mr.State
			}
		}
		return ""
	}
	expectCloses(t, f, state, project.Merge)
}

// TestGiteaClosePullRequest: on a real Gitea.
func TestGiteaClosePullRequest(t *testing.T) {
	srv := gitea.Start(t)
	srv.CreateRepo(t, "fleet", "main", map[string]string{"apps/agent.yaml": "image: acme/agent:1.0.0\n"})
	srv.CreateUser(t, "alice", "fleet")
	c := srv.Client(t)
	pushToBranch(t, c, srv.Admin, "uprev/updates", "apps/one.yaml", "image: acme/agent:1.1.0\n", true)
	f := newForge(t, forge.Config{Provider: forge.Gitea, URL: srv.URL, Repository: srv.Admin + "/fleet", Token: srv.Token})
	state := func(n int64) string {
		pr, _, err := c.GetPullRequest(srv.Admin, "fleet", n)
		if err != nil {
			t.Fatal(err)
		}
		if pr.HasMerged {
			return "merged"
		}
		return string(pr.State)
	}
	expectCloses(t, f, state, func(n int64) { srv.MergePullRequest(t, "fleet", n) })
}
