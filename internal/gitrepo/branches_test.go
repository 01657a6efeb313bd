package gitrepo_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestBranchOfAGroup: Unmerged lists the commits of a branch its base
// does not have, with their authors; Proposes says whether merging the
// branch would change the base, false once the base has its change
// (merged or squashed) or when it is behind; DeleteBranch deletes the
// branch only at the tip the caller read.
func TestBranchOfAGroup(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", seedFiles)
	c, r := newCache(t), newRemote(t, url, nil)
	pushed := writeBack(t, c, r, "main", "uprev/updates-agent", map[string]string{"clusters/prod/agent.yaml": "image: ghcr.io/acme/agent:1.5.0\n"})
	mine := srv.CommitFile(t, "fleet", "uprev/updates-agent", "NOTES.md", "mine\n", "A note")
	srv.CommitFile(t, "fleet", "main", "README.md", "# fleet, moved on\n", "Main moves on")

	s := open(t, c, r, "main", "uprev/updates-agent")
	h := s.History(gitrepo.HistoryOptions{})
	commits, complete, found, err := h.Unmerged("uprev/updates-agent", "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(complete).To(BeTrue())
	g.Expect(commits).To(Equal([]gitrepo.BranchCommit{
		{SHA: mine, AuthorName: gitserver.AuthorName, AuthorEmail: gitserver.AuthorEmail, CommitterEmail: gitserver.AuthorEmail},
		{SHA: pushed, AuthorName: "uprev", AuthorEmail: "uprev@example.com", CommitterEmail: "uprev@example.com"},
	}))
	_, _, found, err = h.Unmerged("nope", "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse())
	proposes, err := h.Proposes("uprev/updates-agent", "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(proposes).To(BeTrue())
	s.Close()

	// main gets both changes another way (a squash merge).
	srv.CommitFile(t, "fleet", "main", "clusters/prod/agent.yaml", "image: ghcr.io/acme/agent:1.5.0\n", "Squashed")
	srv.CommitFile(t, "fleet", "main", "NOTES.md", "mine\n", "Squashed too")
	s = open(t, c, r, "main", "uprev/updates-agent")
	h = s.History(gitrepo.HistoryOptions{})
	proposes, err = h.Proposes("uprev/updates-agent", "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(proposes).To(BeFalse(), "its changes are all in main")
	proposes, err = h.Proposes("main", "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(proposes).To(BeFalse())

	g.Expect(s.DeleteBranch(ctx, "uprev/updates-agent", pushed)).To(MatchError(gitrepo.ErrBranchMoved))
	g.Expect(srv.Git(t, "fleet", "rev-parse", "refs/heads/uprev/updates-agent")).To(Equal(mine), "left as it was")
	g.Expect(s.DeleteBranch(ctx, "uprev/updates-agent", mine)).To(Succeed())
	g.Expect(srv.Git(t, "fleet", "for-each-ref", "refs/heads/uprev/updates-agent")).To(BeEmpty(), "deleted")
	g.Expect(s.PushTip()).To(BeEmpty())
	g.Expect(s.DeleteBranch(ctx, "uprev/updates-agent", mine)).To(Succeed(), "already gone")
}
