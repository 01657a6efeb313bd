package gitrepo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5"
	. "github.com/onsi/gomega"
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
	g.Expect(s.stage([]string{"a.yaml", "b.yaml"})).To(Succeed())
	idx, err := repo.Storer.Index()
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
