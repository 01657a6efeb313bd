package confined_test

import (
	"os"
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
	defer root.Close()

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
	defer root.Close()

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
