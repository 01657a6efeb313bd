package crds

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestDestinationMustStayInTheCheckout(t *testing.T) {
	img := fluxArtifact(t, file("agents.yaml", crdYAML("agents", "example.com", "1.0.0")))
	bundle, err := Extract(t.Context(), img, Source{ArtifactMediaType: FluxContentMediaType}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	root := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"../crds", "/tmp/crds", "crds/../../crds", ".git/crds", "a/.git", "elsewhere", "elsewhere/crds"} {
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Write(root, dir, bundle, WriteOptions{})
			g.Expect(err).To(MatchError(ErrPathEscapesRoot))
			g.Expect(snapshot(t, outside)).To(BeEmpty())
			g.Expect(snapshot(t, root)).To(Equal(map[string]string{"elsewhere": "-> " + outside}))
		})
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	img := fluxArtifact(t, file("agents.yaml", crdYAML("agents", "example.com", "1.0.0")))
	bundle, err := Extract(t.Context(), img, Source{ArtifactMediaType: FluxContentMediaType}, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	res, err := Write(root, "./clusters/crds", bundle, WriteOptions{DryRun: true, Version: "1.0.0"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Summary()).To(Equal("crds: new: agents.example.com"))
	g.Expect(res.Added[0].File).To(Equal("clusters/crds/agents.example.com.yaml"))
	g.Expect(snapshot(t, root)).To(BeEmpty())
}

func TestReplacedFileKeepsItsMode(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	src := Source{ArtifactMediaType: FluxContentMediaType}
	_, err := update(t, fluxArtifact(t, file("agents.yaml", crdYAML("agents", "example.com", "1.0.0"))), src, root, "crds", WriteOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	name := filepath.Join(root, "crds", "agents.example.com.yaml")
	info, err := os.Stat(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o644)))
	g.Expect(os.Chmod(name, 0o600)).To(Succeed())
	res, err := update(t, fluxArtifact(t, file("agents.yaml", crdYAML("agents", "example.com", "2.0.0"))), src, root, "crds", WriteOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(res.Updated)).To(Equal([]string{"agents.example.com"}))
	g.Expect(res.Summary()).To(Equal("crds: agents.example.com 1.0.0 --> 2.0.0"))
	info, err = os.Stat(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	entries, err := os.ReadDir(filepath.Join(root, "crds"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "no temporary file is left")
}

// TestDestinationLinkedIntoGitIsRefused: a CRD folder that is, or sits
// under, a symbolic link into the checkout's .git directory is refused as
// .git itself is, and nothing is made or written there.
func TestDestinationLinkedIntoGitIsRefused(t *testing.T) {
	img := fluxArtifact(t, file("agents.yaml", crdYAML("agents", "example.com", "1.0.0")))
	bundle, err := Extract(t.Context(), img, Source{ArtifactMediaType: FluxContentMediaType}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"hooks", "hooks/crds", "git/hooks"} {
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			root := t.TempDir()
			g.Expect(os.MkdirAll(filepath.Join(root, ".git", "hooks"), 0o755)).To(Succeed())
			g.Expect(os.Symlink(".git/hooks", filepath.Join(root, "hooks"))).To(Succeed())
			g.Expect(os.Symlink(".git", filepath.Join(root, "git"))).To(Succeed())
			_, err := Write(root, dir, bundle, WriteOptions{})
			g.Expect(err).To(MatchError(ErrPathEscapesRoot))
			g.Expect(err.Error()).To(ContainSubstring(dir))
			g.Expect(snapshot(t, filepath.Join(root, ".git"))).To(BeEmpty())
			g.Expect(filepath.Join(root, ".git", "hooks", "crds")).NotTo(BeADirectory())
		})
	}
}

// TestLinkedCRDFileIsReplacedNotWrittenThrough: a CRD file of the folder
// that is a symbolic link out of the checkout is replaced by the new file;
// the file it pointed to is never written.
func TestLinkedCRDFileIsReplacedNotWrittenThrough(t *testing.T) {
	g := NewWithT(t)
	outside := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(outside, "target.yaml"), []byte("untouched\n"), 0o644)).To(Succeed())
	root := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(root, "crds"), 0o755)).To(Succeed())
	g.Expect(os.Symlink(filepath.Join(outside, "target.yaml"), filepath.Join(root, "crds", "agents.example.com.yaml"))).To(Succeed())
	res, err := update(t, fluxArtifact(t, file("agents.yaml", crdYAML("agents", "example.com", "1.0.0"))), Source{ArtifactMediaType: FluxContentMediaType}, root, "crds", WriteOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(res.Added)).To(Equal([]string{"agents.example.com"}))
	g.Expect(snapshot(t, outside)).To(Equal(map[string]string{"target.yaml": "untouched\n"}))
	info, err := os.Lstat(filepath.Join(root, "crds", "agents.example.com.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().IsRegular()).To(BeTrue(), "the link is replaced by a file")
}
