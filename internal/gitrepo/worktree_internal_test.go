package gitrepo

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestWorktreeChangesHashesRacilyCleanFiles covers the case stat data
// cannot tell: a file rewritten with the same size within the timestamp
// tick in which the index was written.
func TestWorktreeChangesHashesRacilyCleanFiles(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"a.yaml", "b.yaml"} {
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte("tag: 1.0.0\n"), 0o644)).To(Succeed())
	}
	s := &Session{dir: dir, repo: repo}
	idx, err := repo.Storer.Index()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.stageInto(idx, []string{"a.yaml", "b.yaml"})).To(Succeed())
	idx, err = repo.Storer.Index()
	g.Expect(err).NotTo(HaveOccurred())
	entry, err := idx.Entry("a.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	tick := entry.ModifiedAt

	// a.yaml changes without its size or time changing, in the tick the
	// index was written; b.yaml is untouched and as racy.
	a := filepath.Join(dir, "a.yaml")
	g.Expect(os.WriteFile(a, []byte("tag: 2.0.0\n"), 0o644)).To(Succeed())
	g.Expect(os.Chtimes(a, tick, tick)).To(Succeed())
	g.Expect(os.Chtimes(filepath.Join(dir, "b.yaml"), tick, tick)).To(Succeed())
	g.Expect(os.Chtimes(filepath.Join(dir, ".git", "index"), tick, tick)).To(Succeed())

	changes, err := s.worktreeChanges(idx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changes).To(ConsistOf("a.yaml"))
}

// statusAtHead returns what `git status` shows in the clone in dir against
// the tree of HEAD, read into an index of its own: the index of the clone
// may hold an older commit.
func statusAtHead(t *testing.T, dir string) string {
	t.Helper()
	env := append(os.Environ(), "GIT_INDEX_FILE="+filepath.Join(t.TempDir(), "index"))
	for _, args := range [][]string{{"read-tree", "HEAD"}, {"--no-optional-locks", "status", "--porcelain", "--untracked-files=all"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		if args[0] != "read-tree" {
			return strings.TrimSpace(string(out))
		}
	}
	return ""
}

// TestWorktreeStateAgreesWithGitStatus runs a kept clone through a
// sequence of uses and checks after each what the session's worktreeState
// claims against the git CLI: whenever it says the index holds a commit
// (HEAD or an older one), `git diff --cached` against it shows nothing, and
// whenever it says the tree is clean at HEAD, `git status` against HEAD's
// tree shows nothing. It also checks that it claims what it should,
// so that a state that never claims anything would fail.
func TestWorktreeStateAgreesWithGitStatus(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote, err := NewRemote(srv.InitRepo(t, "fleet", "main", map[string]string{"a.yaml": "tag: 1.0.0\n", "b.yaml": "tag: 1.0.0\n"}), nil)
	g.Expect(err).NotTo(HaveOccurred())
	cache, err := NewCache(filepath.Join(t.TempDir(), "clones"))
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	author := WriteBackOptions{AuthorName: "uprev", AuthorEmail: "uprev@example.com"}

	// check compares state, the state of the clone in dir, with git.
	check := func(step, dir string, state worktreeState, wantIndex, wantClean bool) {
		t.Helper()
		head := plumbing.NewHash(gitserver.RunGit(t, dir, "rev-parse", "HEAD"))
		status := statusAtHead(t, dir)
		indexed := state.indexCommit(dir)
		index, clean := !indexed.IsZero(), state.cleanAt(dir, head)
		staged := ""
		if index {
			staged = gitserver.RunGit(t, dir, "--no-optional-locks", "diff", "--cached", "--name-status", indexed.String())
			g.Expect(staged).To(BeEmpty(), "%s: the state says the index holds %s", step, indexed)
		}
		if clean {
			g.Expect(status).To(BeEmpty(), "%s: the state says the tree is clean", step)
		}
		g.Expect(index).To(Equal(wantIndex), "%s: index known (git: %q)", step, staged)
		g.Expect(clean).To(Equal(wantClean), "%s: clean (git: %q)", step, status)
	}
	open := func() *Session {
		s, err := cache.Open(ctx, remote, OpenOptions{Branch: "main"})
		g.Expect(err).NotTo(HaveOccurred())
		return s
	}
	write := func(files map[string]string, message string) EditFunc {
		return func(dir string, _ *History) (Edit, error) {
			var names []string
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					return Edit{}, err
				}
				names = append(names, name)
			}
			return Edit{Message: message, Files: names}, nil
		}
	}

	s := open()
	check("a fresh clone", s.dir, s.tree, true, true)
	kc := s.clone
	s.Close()
	check("a use that wrote nothing leaves it clean", kc.dir, kc.tree, true, true)

	s = open()
	check("the next use, at once", s.dir, s.tree, true, true)
	g.Expect(os.WriteFile(filepath.Join(s.Dir(), "e.yaml"), []byte("build output\n"), 0o644)).To(Succeed())
	s.Close()
	check("a use given the tree by Dir", kc.dir, kc.tree, true, false)

	s = open()
	check("the next use, checked", s.dir, s.tree, true, true)
	_, err = s.WriteBack(ctx, author, write(nil, ""))
	g.Expect(err).NotTo(HaveOccurred())
	check("an edit that changed nothing", s.dir, s.tree, true, false)
	s.Close()

	s = open()
	_, err = s.WriteBack(ctx, author, write(map[string]string{"a.yaml": "tag: 2.0.0\n", "c.yaml": "new\n"}, ""))
	g.Expect(err).NotTo(HaveOccurred())
	check("an edit that wrote files but reported no change", s.dir, s.tree, true, false)
	s.Close()

	s = open()
	check("the next use repairs the tree", s.dir, s.tree, true, true)
	pushed, err := s.WriteBack(ctx, author, write(map[string]string{"b.yaml": "tag: 2.0.0\n"}, "Update b"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pushed).NotTo(BeEmpty())
	check("a commit", s.dir, s.tree, true, true)
	s.Close()

	s = open()
	_, err = s.WriteBack(ctx, author, func(string, *History) (Edit, error) { return Edit{Files: []string{}}, nil })
	g.Expect(err).NotTo(HaveOccurred())
	check("an edit that names no file written", s.dir, s.tree, true, true)
	s.Close()

	// Someone stages a file in the kept clone between two uses.
	g.Expect(os.WriteFile(filepath.Join(kc.dir, "d.yaml"), []byte("staged\n"), 0o644)).To(Succeed())
	gitserver.RunGit(t, kc.dir, "add", "d.yaml")
	check("a git add by someone else", kc.dir, kc.tree, false, false)

	s = open()
	check("the next use resets the index", s.dir, s.tree, true, true)
	g.Expect(gitserver.RunGit(t, s.dir, "rev-parse", "HEAD")).To(Equal(pushed))
	s.tree.invalidate()
	check("invalidated", s.dir, s.tree, false, false)
	s.Close()
}
