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
