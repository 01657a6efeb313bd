package gitrepo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

const agentPath = "clusters/prod/agent.yaml"

func TestWriteBackCreatesPushBranchFromBranch(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	mainTip := srv.Log(t, "fleet", "main")[0].SHA

	sha := writeBack(t, newCache(t), remote, "main", "uprev/updates", map[string]string{agentPath: "image: ghcr.io/acme/agent:1.4.2\n"})

	log := srv.Log(t, "fleet", "uprev/updates")
	g.Expect(log).To(HaveLen(2))
	g.Expect(log[0].SHA).To(Equal(sha))
	g.Expect(log[0].Parents).To(Equal([]string{mainTip}))
	g.Expect(log[0].Subject).To(Equal("Update images"))
	g.Expect(srv.ReadFile(t, "fleet", "uprev/updates", agentPath)).To(Equal("image: ghcr.io/acme/agent:1.4.2\n"))
	g.Expect(srv.Log(t, "fleet", "main")[0].SHA).To(Equal(mainTip), "the branch read is untouched")
	author := srv.Git(t, "fleet", "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha)
	g.Expect(author).To(Equal("uprev <uprev@example.com>|uprev <uprev@example.com>"))
}

func TestWriteBackFastForwardsPushBranchBehindBranch(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	srv.Git(t, "fleet", "branch", "uprev/updates", "main")
	mainTip := srv.CommitFile(t, "fleet", "main", "clusters/prod/app.yaml", "image: ghcr.io/acme/app:2.1.0\n", "Bump app by hand")

	sha := writeBack(t, newCache(t), remote, "main", "uprev/updates", map[string]string{agentPath: "image: ghcr.io/acme/agent:1.4.2\n"})

	log := srv.Log(t, "fleet", "uprev/updates")
	g.Expect(subjects(log)).To(Equal([]string{"Update images", "Bump app by hand", "Initial commit"}))
	g.Expect(log[0].SHA).To(Equal(sha))
	g.Expect(log[0].Parents).To(Equal([]string{mainTip}))
	g.Expect(srv.ReadFile(t, "fleet", "uprev/updates", "clusters/prod/app.yaml")).To(Equal("image: ghcr.io/acme/app:2.1.0\n"))
}

func TestWriteBackMergesBranchIntoDivergedPushBranch(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	cache := newCache(t)
	first := writeBack(t, cache, remote, "main", "uprev/updates", map[string]string{agentPath: "image: ghcr.io/acme/agent:1.4.2\n"})
	// Someone changes main, including the file the push branch changed.
	srv.CommitFile(t, "fleet", "main", "clusters/prod/app.yaml", "image: ghcr.io/acme/app:2.1.0\n", "Bump app by hand")
	mainTip := srv.CommitFile(t, "fleet", "main", agentPath, "# the agent\nimage: ghcr.io/acme/agent:1.4.1\n", "Document the agent")

	sha := writeBack(t, cache, remote, "main", "uprev/updates", map[string]string{agentPath: "# the agent\nimage: ghcr.io/acme/agent:1.4.3\n"})

	log := srv.Log(t, "fleet", "uprev/updates")
	g.Expect(log[0].SHA).To(Equal(sha))
	g.Expect(log[0].Parents).To(Equal([]string{first, mainTip}), "one merge commit of main into the push branch")
	g.Expect(srv.ReadFile(t, "fleet", "uprev/updates", "clusters/prod/app.yaml")).To(Equal("image: ghcr.io/acme/app:2.1.0\n"))
	g.Expect(srv.ReadFile(t, "fleet", "uprev/updates", agentPath)).To(Equal("# the agent\nimage: ghcr.io/acme/agent:1.4.3\n"))
	g.Expect(srv.Git(t, "fleet", "merge-base", "--is-ancestor", mainTip, "uprev/updates")).To(BeEmpty())
}

func TestWriteBackPushBranchAlreadyContainsBranch(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	cache := newCache(t)
	first := writeBack(t, cache, remote, "main", "uprev/updates", map[string]string{agentPath: "image: ghcr.io/acme/agent:1.4.2\n"})

	sha := writeBack(t, cache, remote, "main", "uprev/updates", map[string]string{"clusters/prod/app.yaml": "image: ghcr.io/acme/app:2.0.1\n"})

	log := srv.Log(t, "fleet", "uprev/updates")
	g.Expect(log[0].SHA).To(Equal(sha))
	g.Expect(log[0].Parents).To(Equal([]string{first}))
	g.Expect(srv.ReadFile(t, "fleet", "uprev/updates", agentPath)).To(Equal("image: ghcr.io/acme/agent:1.4.2\n"))
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: 1}))
}

func TestWriteBackNothingChanged(t *testing.T) {
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	cache := newCache(t)

	for name, edit := range map[string]gitrepo.EditFunc{
		"edit reports no change": func(string, *gitrepo.History) (gitrepo.Edit, error) { return gitrepo.Edit{}, nil },
		"same content rewritten": writeFiles(map[string]string{agentPath: seedFiles[agentPath]}),
		"nothing written at all": func(string, *gitrepo.History) (gitrepo.Edit, error) { return gitrepo.Edit{Message: commitMessage}, nil },
		"for a push branch, too": writeFiles(map[string]string{agentPath: seedFiles[agentPath]}),
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			push := ""
			if name == "for a push branch, too" {
				push = "uprev/updates"
			}
			s := open(t, cache, remote, "main", push)
			sha, err := s.WriteBack(context.Background(), author, edit)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sha).To(BeEmpty())
		})
	}
	g := NewWithT(t)
	g.Expect(srv.Log(t, "fleet", "main")).To(HaveLen(1))
	g.Expect(srv.Git(t, "fleet", "branch", "--list", "uprev/updates")).To(BeEmpty())
	g.Expect(srv.Counts().ReceivePack).To(BeZero())
}

func TestWriteBackLeavesNoTraceForTheNextUse(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	cache := newCache(t)

	s := open(t, cache, remote, "main", "")
	_, err := s.WriteBack(context.Background(), author, func(dir string, _ *gitrepo.History) (gitrepo.Edit, error) {
		g.Expect(os.WriteFile(filepath.Join(dir, "stray.yaml"), []byte("x"), 0o644)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(dir, agentPath), []byte("half-written"), 0o644)).To(Succeed())
		return gitrepo.Edit{}, errors.New("rendering failed")
	})
	g.Expect(err).To(MatchError(ContainSubstring("rendering failed")))
	s.Close()

	s = open(t, cache, remote, "main", "")
	g.Expect(filepath.Join(s.Dir(), "stray.yaml")).NotTo(BeAnExistingFile())
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
}

func TestWriteBackKeepsConcurrentCommit(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	s := open(t, newCache(t), remote, "main", "")

	var theirs string
	var seen []string // the tip of main in the history each attempt is given
	edits := 0
	sha, err := s.WriteBack(context.Background(), author, func(dir string, history *gitrepo.History) (gitrepo.Edit, error) {
		edits++
		_, err := history.Walk("main", func(sha, _ string) bool {
			seen = append(seen, sha)
			return false
		})
		if err != nil {
			return gitrepo.Edit{}, err
		}
		if theirs == "" {
			// Someone pushes between our fetch and our push.
			theirs = srv.CommitFile(t, "fleet", "main", "clusters/prod/app.yaml", "image: ghcr.io/acme/app:2.1.0\n", "Bump app by hand")
		}
		return writeFiles(map[string]string{agentPath: "image: ghcr.io/acme/agent:1.4.2\n"})(dir, nil)
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(edits).To(Equal(2))

	log := srv.Log(t, "fleet", "main")
	g.Expect(seen).To(Equal([]string{log[2].SHA, theirs}), "each attempt reads the history it is applied on")
	g.Expect(subjects(log)).To(Equal([]string{"Update images", "Bump app by hand", "Initial commit"}))
	g.Expect(log[0].SHA).To(Equal(sha))
	g.Expect(log[0].Parents).To(Equal([]string{theirs}), "history is linear")
	g.Expect(srv.ReadFile(t, "fleet", "main", "clusters/prod/app.yaml")).To(Equal("image: ghcr.io/acme/app:2.1.0\n"))
	g.Expect(srv.ReadFile(t, "fleet", "main", agentPath)).To(Equal("image: ghcr.io/acme/agent:1.4.2\n"))
}

func TestWriteBackGivesUpWhenBranchKeepsMoving(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	srv.Git(t, "fleet", "branch", "uprev/updates", "main")
	s := open(t, newCache(t), remote, "main", "uprev/updates")

	edits := 0
	opts := author
	opts.MaxAttempts = 3
	_, err := s.WriteBack(context.Background(), opts, func(dir string, _ *gitrepo.History) (gitrepo.Edit, error) {
		edits++
		srv.CommitFile(t, "fleet", "uprev/updates", "busy.yaml", string(rune('a'+edits)), "Someone else again")
		return writeFiles(map[string]string{agentPath: "image: ghcr.io/acme/agent:1.4.2\n"})(dir, nil)
	})
	var rejected *gitrepo.PushRejectedError
	g.Expect(errors.As(err, &rejected)).To(BeTrue(), "%v", err)
	g.Expect(rejected.Attempts).To(Equal(3))
	g.Expect(rejected.Branch).To(Equal("uprev/updates"))
	g.Expect(edits).To(Equal(3))
	g.Expect(subjects(srv.Log(t, "fleet", "uprev/updates"))).NotTo(ContainElement("Update images"))

	_, err = s.WriteBack(context.Background(), author, writeFiles(nil))
	g.Expect(err).To(MatchError(ContainSubstring("already")))
}
