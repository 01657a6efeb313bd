package gitrepo_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// expectCheckedOut checks with the git CLI that HEAD and the working tree
// of s hold exactly the commit sha: nothing changed or untracked, compared
// with an index read from HEAD, since the clone's own may hold an older
// commit.
func expectCheckedOut(t *testing.T, g *WithT, s *gitrepo.Session, sha string) {
	t.Helper()
	out, err := runGit(t, s.Dir(), nil, "rev-parse", "HEAD")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal(sha))
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	out, err = runGit(t, s.Dir(), env, "read-tree", "HEAD")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = runGit(t, s.Dir(), env, "--no-optional-locks", "status", "--porcelain", "--untracked-files=all", "--ignored=no")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(BeEmpty(), "the working tree is exactly the commit")
}

// reshape is an edit that adds, changes and deletes files, turns the file
// README.md into a directory and the directory clusters/prod into a file.
func reshape(dir string, _ *gitrepo.History) (gitrepo.Edit, error) {
	if err := os.Remove(filepath.Join(dir, "README.md")); err != nil {
		return gitrepo.Edit{}, err
	}
	if err := os.RemoveAll(filepath.Join(dir, "clusters/prod")); err != nil {
		return gitrepo.Edit{}, err
	}
	edit, err := writeFiles(map[string]string{
		"README.md/index.md":       "# fleet, as a folder\n",
		"clusters/prod":            "image: ghcr.io/acme/agent:1.4.2\n",
		"clusters/staging/a.yaml":  "image: ghcr.io/acme/app:2.1.0\n",
		"docs/deep/down/notes.txt": "notes\n",
	})(dir, nil)
	// The files of the directory removed are not named: the whole working
	// tree is compared.
	edit.Files = nil
	return edit, err
}

func TestOpenMovesTheKeptTreeToTheNewTip(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	cache := newCache(t)
	s := open(t, cache, remote, "main", "")
	s.Close()

	// Someone else, with a clone of their own, reshapes the repository.
	other := newCache(t)
	theirs := open(t, other, remote, "main", "")
	pushed, err := theirs.WriteBack(context.Background(), author, reshape)
	g.Expect(err).NotTo(HaveOccurred())
	theirs.Close()

	s = open(t, cache, remote, "main", "")
	expectCheckedOut(t, g, s, pushed)
	g.Expect(readFile(g, s.Dir(), "README.md/index.md")).To(Equal("# fleet, as a folder\n"))
	g.Expect(filepath.Join(s.Dir(), "clusters/prod")).To(BeARegularFile())
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: 1}))
	s.Close()

	// And back again.
	seedTree := srv.Git(t, "fleet", "rev-parse", "main~1^{tree}")
	restored := srv.Git(t, "fleet", "commit-tree", seedTree, "-p", pushed, "-m", "Restore")
	srv.Git(t, "fleet", "update-ref", "refs/heads/main", restored)
	s = open(t, cache, remote, "main", "")
	expectCheckedOut(t, g, s, restored)
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
	g.Expect(filepath.Join(s.Dir(), "docs")).NotTo(BeAnExistingFile(), "directories left empty are removed")
}

func TestWriteBackCommitsAddedChangedAndRemovedFiles(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	files := map[string]string{".gitignore": "*.tmp\n"}
	for p, c := range seedFiles {
		files[p] = c
	}
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", files), nil)
	s := open(t, newCache(t), remote, "main", "")

	sha, err := s.WriteBack(context.Background(), author, func(dir string, _ *gitrepo.History) (gitrepo.Edit, error) {
		if err := os.Remove(filepath.Join(dir, "README.md")); err != nil {
			return gitrepo.Edit{}, err
		}
		edit, err := writeFiles(map[string]string{
			agentPath:                  "image: ghcr.io/acme/agent:1.4.2\n",
			"clusters/staging/a.yaml":  "image: ghcr.io/acme/app:2.1.0\n",
			"clusters/staging/new.tmp": "ignored\n",
		})(dir, nil)
		edit.Files = append(edit.Files, "README.md")
		return edit, err
	})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(srv.Git(t, "fleet", "diff", "--name-status", "main~1", "main")).To(Equal(
		"D\tREADME.md\nM\tclusters/prod/agent.yaml\nA\tclusters/staging/a.yaml"))
	g.Expect(srv.Log(t, "fleet", "main")[0].SHA).To(Equal(sha))
	expectCheckedOut(t, g, s, sha)
}

func TestDirtyTreeLeftByAFailedEditIsResetOnTheNextUse(t *testing.T) {
	for name, spoil := range map[string]func(g *WithT, dir string){
		"file changed, same size": func(g *WithT, dir string) {
			g.Expect(os.WriteFile(filepath.Join(dir, agentPath), []byte("image: ghcr.io/acme/agent:9.9.9\n"), 0o644)).To(Succeed())
		},
		"file removed": func(g *WithT, dir string) {
			g.Expect(os.Remove(filepath.Join(dir, "README.md"))).To(Succeed())
		},
		"file made executable": func(g *WithT, dir string) {
			g.Expect(os.Chmod(filepath.Join(dir, "README.md"), 0o755)).To(Succeed())
		},
		"untracked file": func(g *WithT, dir string) {
			g.Expect(os.MkdirAll(filepath.Join(dir, "stray/deep"), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(dir, "stray/deep/x.yaml"), []byte("x"), 0o644)).To(Succeed())
		},
	} {
		for _, moved := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, branch moved: %t", name, moved), func(t *testing.T) {
				g := NewWithT(t)
				srv := gitserver.Start(t)
				remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
				cache := newCache(t)

				s := open(t, cache, remote, "main", "")
				_, err := s.WriteBack(context.Background(), author, func(dir string, _ *gitrepo.History) (gitrepo.Edit, error) {
					spoil(g, dir)
					return gitrepo.Edit{}, errors.New("rendering failed")
				})
				g.Expect(err).To(MatchError(ContainSubstring("rendering failed")))
				s.Close()
				tip := srv.Log(t, "fleet", "main")[0].SHA
				if moved {
					tip = srv.CommitFile(t, "fleet", "main", "clusters/prod/app.yaml", "image: ghcr.io/acme/app:2.1.0\n", "Bump app by hand")
				}

				s = open(t, cache, remote, "main", "")
				expectCheckedOut(t, g, s, tip)
				g.Expect(cache.Stats().Clones).To(Equal(int64(1)))
			})
		}
	}
}

func TestIndexChangedOutsideASessionIsResetOnTheNextUse(t *testing.T) {
	g := NewWithT(t)
	fleet := newKeptFleet(t)
	srv, remote, cache, dir := fleet.srv, fleet.remote, fleet.cache, fleet.dir

	// Someone stages a change in the kept clone: the working tree matches
	// the index, which no longer matches HEAD.
	g.Expect(os.WriteFile(filepath.Join(dir, agentPath), []byte("image: ghcr.io/acme/agent:6.6.6\n"), 0o644)).To(Succeed())
	out, err := runGit(t, dir, nil, "add", agentPath)
	g.Expect(err).NotTo(HaveOccurred(), out)
	tip := srv.CommitFile(t, "fleet", "main", "clusters/prod/app.yaml", "image: ghcr.io/acme/app:2.1.0\n", "Bump app by hand")

	s := open(t, cache, remote, "main", "")
	expectCheckedOut(t, g, s, tip)
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
}

// TestIndexReplacedWithinOneTimestampTickIsNoticed: file times tick
// coarsely (a few milliseconds on Linux), so a `git add` in the kept clone
// right after uprev wrote its index can leave an index of the same size
// and modification time. It is still another file (git writes a new index
// and renames it over the old), and the next use must notice it.
func TestIndexReplacedWithinOneTimestampTickIsNoticed(t *testing.T) {
	g := NewWithT(t)
	fleet := newKeptFleet(t)
	srv, remote, cache, dir := fleet.srv, fleet.remote, fleet.cache, fleet.dir
	indexPath := filepath.Join(dir, ".git", "index")
	written, err := os.Stat(indexPath)
	g.Expect(err).NotTo(HaveOccurred())

	// The same length as the seeded file, so the index keeps its size.
	staged := strings.Replace(seedFiles[agentPath], "agent:", "agenT:", 1)
	g.Expect(staged).To(HaveLen(len(seedFiles[agentPath])))
	g.Expect(os.WriteFile(filepath.Join(dir, agentPath), []byte(staged), 0o644)).To(Succeed())
	out, err := runGit(t, dir, nil, "add", agentPath)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(os.Chtimes(indexPath, written.ModTime(), written.ModTime())).To(Succeed(), "within the tick of uprev's write")
	replaced, err := os.Stat(indexPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(replaced.Size()).To(Equal(written.Size()))
	g.Expect(replaced.ModTime()).To(Equal(written.ModTime()))

	s := open(t, cache, remote, "main", "")
	expectCheckedOut(t, g, s, srv.Log(t, "fleet", "main")[0].SHA)
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
}

func TestRestartedCacheResetsTheKeptTree(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	root := filepath.Join(t.TempDir(), "clones")
	cache, err := gitrepo.NewCache(root)
	g.Expect(err).NotTo(HaveOccurred())
	s := open(t, cache, remote, "main", "")
	dir := s.Dir()
	s.Close()
	// A process stopped between staging and committing left a staged
	// change.
	g.Expect(os.WriteFile(filepath.Join(dir, agentPath), []byte("image: ghcr.io/acme/agent:6.6.6\n"), 0o644)).To(Succeed())
	out, err := runGit(t, dir, nil, "add", agentPath)
	g.Expect(err).NotTo(HaveOccurred(), out)

	restarted, err := gitrepo.NewCache(root)
	g.Expect(err).NotTo(HaveOccurred())
	s = open(t, restarted, remote, "main", "")
	expectCheckedOut(t, g, s, srv.Log(t, "fleet", "main")[0].SHA)
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
	g.Expect(restarted.Stats()).To(Equal(gitrepo.CacheStats{Fetches: 1}))
}
