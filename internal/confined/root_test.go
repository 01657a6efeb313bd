package confined_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/confined"
)

func TestNoNameLeavesTheRoot(t *testing.T) {
	g := NewWithT(t)
	parent := t.TempDir()
	dir := filepath.Join(parent, "checkout")
	g.Expect(os.Mkdir(dir, 0o755)).To(Succeed())
	sentinel := filepath.Join(parent, "sentinel")
	g.Expect(os.WriteFile(sentinel, []byte("untouched\n"), 0o644)).To(Succeed())
	root, err := confined.Open(dir)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = root.Close() }()

	g.Expect(root.Symlink("..", "up")).To(Succeed(), "a link may point anywhere")
	g.Expect(root.Symlink(parent, "abs")).To(Succeed())
	for _, name := range []string{"../sentinel", "a/../../sentinel", "up/sentinel", "abs/sentinel", sentinel} {
		g.Expect(root.WriteFile(name, []byte("pwned\n"), 0o644)).NotTo(Succeed(), name)
		_ = root.Remove(name) // refused, or nothing there to remove: the sentinel tells
		_, err := root.ReadFile(name)
		g.Expect(err).To(HaveOccurred(), name)
	}
	g.Expect(root.RemoveAll("up")).To(Succeed(), "a link is removed, not what it points to")
	g.Expect(os.ReadFile(sentinel)).To(Equal([]byte("untouched\n")))
	g.Expect(filepath.Join(dir, "up")).NotTo(BeAnExistingFile())
}

func TestWriteReplacesAndRemoveTidiesUp(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	root, err := confined.Open(dir)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = root.Close() }()

	g.Expect(root.WriteFile("a/b/c.yaml", []byte("c\n"), 0o644)).To(Succeed())
	g.Expect(root.Symlink("c.yaml", "a/b/link")).To(Succeed())
	g.Expect(root.WriteFile("a/b/link", []byte("file\n"), 0o644)).To(Succeed(), "a link is replaced, not written through")
	g.Expect(root.ReadFile("a/b/c.yaml")).To(Equal([]byte("c\n")))
	g.Expect(root.WriteFile("a/b", []byte("b\n"), 0o644)).To(Succeed(), "a directory is replaced by a file")
	g.Expect(root.ReadFile("a/b")).To(Equal([]byte("b\n")))

	g.Expect(root.Remove("a/b")).To(Succeed())
	g.Expect(filepath.Join(dir, "a")).NotTo(BeADirectory(), "directories left empty are removed")
	g.Expect(root.Remove("gone/missing")).To(Succeed(), "a missing file is no error")
	entries, err := root.ReadDir(".")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty())
}

func TestResolveAndOpenStayInsideAndOutOfGit(t *testing.T) {
	g := NewWithT(t)
	parent := t.TempDir()
	dir := filepath.Join(parent, "checkout")
	g.Expect(os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755)).To(Succeed())
	g.Expect(os.MkdirAll(filepath.Join(dir, "apps", "prod"), 0o755)).To(Succeed())
	root, err := confined.Open(dir)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = root.Close() }()
	g.Expect(root.Symlink("apps/prod", "current")).To(Succeed())
	g.Expect(root.Symlink("..", "up")).To(Succeed())
	g.Expect(root.Symlink(".git/hooks", "hooks")).To(Succeed())

	resolved, info, err := root.Resolve("current")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resolved).To(Equal("apps/prod"))
	g.Expect(info.IsDir()).To(BeTrue())
	for _, name := range []string{"up", "up/checkout", "../x", "/etc"} {
		_, _, err := root.Resolve(name)
		g.Expect(err).To(MatchError(confined.ErrEscapes), name)
		_, err = root.OpenRoot(name)
		g.Expect(err).To(MatchError(confined.ErrEscapes), name)
		_, err = root.OpenWorkDir(path.Join(name, "new"), true)
		g.Expect(err).To(MatchError(confined.ErrEscapes), name)
	}
	_, _, err = root.Resolve("missing")
	g.Expect(err).To(MatchError(fs.ErrNotExist))

	for _, name := range []string{".git", ".git/hooks", "a/.git/b", "hooks", "hooks/new/deeper"} {
		_, err := root.OpenWorkDir(name, true)
		g.Expect(err).To(MatchError(confined.ErrGitDir), name)
	}
	g.Expect(filepath.Join(dir, ".git", "hooks", "new")).NotTo(BeADirectory(), "nothing is made before the refusal")
	work, err := root.OpenWorkDir("current/crds", true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(work.Close()).To(Succeed())
	g.Expect(filepath.Join(dir, "apps", "prod", "crds")).To(BeADirectory())
	_, err = root.OpenWorkDir("absent", false)
	g.Expect(err).To(MatchError(fs.ErrNotExist))
}

func TestReplaceFileKeepsTheModeGivenAndLeavesNoTemporaryFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	root, err := confined.Open(dir)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = root.Close() }()
	outside := filepath.Join(t.TempDir(), "target")
	g.Expect(os.WriteFile(outside, []byte("untouched\n"), 0o644)).To(Succeed())
	g.Expect(root.Symlink(outside, "a/file.yaml")).To(Succeed())

	g.Expect(root.ReplaceFile("a/file.yaml", []byte("new\n"), 0o600)).To(Succeed())
	g.Expect(os.ReadFile(outside)).To(Equal([]byte("untouched\n")), "a link is replaced, never written through")
	info, err := root.Lstat("a/file.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode()).To(Equal(fs.FileMode(0o600)))
	entries, err := root.ReadDir("a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1))
}
