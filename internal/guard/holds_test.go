package guard_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

const agentPath = "clusters/prod/agent.yaml"

// seedFiles are the files of the test repositories.
var seedFiles = map[string]string{
	agentPath:   "image: ghcr.io/acme/agent:1.4.1\n",
	"README.md": "# fleet\n",
}

// updateMessage is an automation commit message for updates.
func updateMessage(updates ...guard.Update) string {
	msg := "Update images\n"
	for i, u := range updates {
		if i == 0 {
			msg += "\n"
		}
		msg += guard.FormatUpdateTrailer(u) + "\n"
	}
	return msg
}

// openSession opens a session of a kept clone of url's branch and closes it
// at the end of the test.
func openSession(t *testing.T, url, branch string) *gitrepo.Session {
	t.Helper()
	cache, err := gitrepo.NewCache(filepath.Join(t.TempDir(), "clones"))
	if err != nil {
		t.Fatal(err)
	}
	remote, err := gitrepo.NewRemote(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cache.Open(context.Background(), remote, gitrepo.OpenOptions{Branch: branch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestHoldsFromReverts(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", seedFiles)

	agent := guard.Update{Policy: "uprev-system/agent", Old: "1.4.1", New: "1.4.2"}
	app := guard.Update{Policy: "uprev-system/app", Old: "2.0.0", New: "2.1.0"}
	both := srv.CommitFile(t, "fleet", "main", agentPath, "image: ghcr.io/acme/agent:1.4.2\n", updateMessage(agent, app))
	human := srv.CommitFile(t, "fleet", "main", "README.md", "# fleet!\n", "Edit README")

	holdsOf := func() []guard.Hold {
		s := openSession(t, url, "main")
		defer s.Close()
		holds, err := guard.ReadHolds(s.History(gitrepo.HistoryOptions{}), "main", "")
		g.Expect(err).NotTo(HaveOccurred())
		return holds
	}
	g.Expect(holdsOf()).To(BeEmpty())

	// A revert of a commit without trailers holds nothing.
	srv.Revert(t, "fleet", "main", human)
	g.Expect(holdsOf()).To(BeEmpty())

	revert := srv.Revert(t, "fleet", "main", both)
	g.Expect(holdsOf()).To(ConsistOf(
		guard.Hold{Policy: "uprev-system/agent", Version: "1.4.2", RevertedIn: revert},
		guard.Hold{Policy: "uprev-system/app", Version: "2.1.0", RevertedIn: revert},
	))

	// A revert of the revert ends the holds.
	reapply := srv.Revert(t, "fleet", "main", revert)
	g.Expect(holdsOf()).To(BeEmpty())

	// Reverting that again brings the first revert, and its holds, back.
	srv.Revert(t, "fleet", "main", reapply)
	g.Expect(holdsOf()).To(ConsistOf(
		guard.Hold{Policy: "uprev-system/agent", Version: "1.4.2", RevertedIn: revert},
		guard.Hold{Policy: "uprev-system/app", Version: "2.1.0", RevertedIn: revert},
	))
}

func TestHoldsBounds(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", seedFiles)

	agent := guard.Update{Policy: "uprev-system/agent", Old: "1.4.1", New: "1.4.2"}
	update := srv.CommitFile(t, "fleet", "main", agentPath, "image: ghcr.io/acme/agent:1.4.2\n", updateMessage(agent))
	revert := srv.Revert(t, "fleet", "main", update)
	later := srv.CommitFile(t, "fleet", "main", "README.md", "# fleet!\n", "Edit README")
	srv.CommitFile(t, "fleet", "main", "README.md", "# fleet!!\n", "Edit README again")

	s := openSession(t, url, "main")
	holds := func(opts gitrepo.HistoryOptions) ([]guard.Hold, error) {
		return guard.ReadHolds(s.History(opts), "main", "")
	}
	hold := guard.Hold{Policy: "uprev-system/agent", Version: "1.4.2", RevertedIn: revert}
	for name, tc := range map[string]struct {
		opts gitrepo.HistoryOptions
		want []guard.Hold
	}{
		"default depth":      {gitrepo.HistoryOptions{}, []guard.Hold{hold}},
		"deep enough":        {gitrepo.HistoryOptions{MaxCommits: 3}, []guard.Hold{hold}},
		"too shallow":        {gitrepo.HistoryOptions{MaxCommits: 2}, nil},
		"since before":       {gitrepo.HistoryOptions{Since: update}, []guard.Hold{hold}},
		"since after revert": {gitrepo.HistoryOptions{Since: later}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			holds, err := holds(tc.opts)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			NewWithT(t).Expect(holds).To(Equal(tc.want))
		})
	}
	g.Expect(holds(gitrepo.HistoryOptions{MaxCommits: 1})).To(BeEmpty())
}

// commit is one commit of a fakeHistory.
type commit struct {
	sha, message string
}

// fakeHistory is an in-memory guard.History: branches of commits, newest
// first, and every commit by SHA.
type fakeHistory struct {
	branches map[string][]commit
	all      map[string]string
	err      error
}

func (h *fakeHistory) Walk(branch string, fn func(sha, message string) bool) (bool, error) {
	commits, ok := h.branches[branch]
	if !ok {
		return false, nil
	}
	if h.err != nil {
		return true, h.err
	}
	for _, c := range commits {
		if !fn(c.sha, c.message) {
			break
		}
	}
	return true, nil
}

func (h *fakeHistory) Message(sha string) (string, bool, error) {
	m, ok := h.all[sha]
	return m, ok, nil
}

// sha is a fake commit SHA: n in hex, 40 digits.
func sha(n int) string {
	return fmt.Sprintf("%040x", n)
}

// revertOf is git's message for a revert of sha.
func revertOf(sha string) string {
	return "Revert \"x\"\n\nThis reverts commit " + sha + ".\n"
}

func TestReadHolds(t *testing.T) {
	agent := guard.Update{Policy: "fleet/agent", Old: "1.0.0", New: "1.1.0"}
	app := guard.Update{Policy: "fleet/app", Old: "2.0.0", New: "2.1.0"}
	// Commits 1 to 9 exist in the repository; branches list some of them.
	all := map[string]string{
		sha(1): updateMessage(agent, app),
		sha(2): "Edit README\n",
		sha(3): revertOf(sha(1)),
		sha(4): revertOf(sha(3)),
		sha(5): revertOf(sha(4)),
		sha(6): revertOf(sha(2)),
		sha(7): revertOf(sha(100)), // a commit the repository does not have
		sha(8): updateMessage(agent),
		sha(9): revertOf(sha(8)),
	}
	branch := func(shas ...int) []commit {
		var commits []commit
		for _, n := range shas {
			commits = append(commits, commit{sha: sha(n), message: all[sha(n)]})
		}
		return commits
	}
	agentHeld := func(in int) guard.Hold {
		return guard.Hold{Policy: "fleet/agent", Version: "1.1.0", RevertedIn: sha(in)}
	}
	appHeld := func(in int) guard.Hold { return guard.Hold{Policy: "fleet/app", Version: "2.1.0", RevertedIn: sha(in)} }
	for _, tc := range []struct {
		name             string
		main, review     []commit
		pushBranch       string
		want             []guard.Hold
		wantErr          string
		walkErr          error
		noMain, noReview bool
	}{
		{name: "no revert", main: branch(2, 1)},
		{name: "a revert of a commit without trailers", main: branch(6, 2, 1)},
		{name: "a revert of a commit not in the repository", main: branch(7, 2, 1)},
		{name: "a revert holds every update of its target", main: branch(3, 2, 1), want: []guard.Hold{agentHeld(3), appHeld(3)}},
		{name: "a revert of the revert ends the holds", main: branch(4, 3, 2, 1)},
		{name: "reverting that again brings them back", main: branch(5, 4, 3, 2, 1), want: []guard.Hold{agentHeld(3), appHeld(3)}},
		{name: "a version reverted twice is held once, for the newest revert", main: branch(9, 8, 3, 2, 1), want: []guard.Hold{agentHeld(9), appHeld(3)}},
		{name: "a revert on the push branch", main: branch(1), review: branch(3, 1), pushBranch: "review", want: []guard.Hold{agentHeld(3), appHeld(3)}},
		{
			name: "holds on both branches are merged, the branch's first", main: branch(9, 8, 1), review: branch(3, 1), pushBranch: "review",
			want: []guard.Hold{agentHeld(9), appHeld(3)},
		},
		{name: "the push branch is the branch", main: branch(1), review: branch(3, 1), pushBranch: "main"},
		{name: "no push branch yet", main: branch(3, 1), pushBranch: "review", noReview: true, want: []guard.Hold{agentHeld(3), appHeld(3)}},
		{name: "no branch", noMain: true, wantErr: `branch "main" not found`},
		{name: "a history that cannot be read", main: branch(1), walkErr: errors.New("broken pack"), wantErr: `walking the history of branch "main": broken pack`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := &fakeHistory{branches: map[string][]commit{}, all: all, err: tc.walkErr}
			if !tc.noMain {
				h.branches["main"] = tc.main
			}
			if !tc.noReview {
				h.branches["review"] = tc.review
			}
			holds, err := guard.ReadHolds(h, "main", tc.pushBranch)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(tc.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(holds).To(Equal(tc.want))
		})
	}
}
