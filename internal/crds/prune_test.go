package crds

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestRemovedCRDIsKeptUnlessPrune(t *testing.T) {
	root := t.TempDir()
	src := Source{ArtifactMediaType: FluxContentMediaType}
	v1 := fluxArtifact(t,
		file("agents.yaml", crdYAML("agents", "example.com", "1.0.0")),
		file("reports.yaml", crdYAML("reports", "example.com", "1.0.0")),
	)
	v2 := fluxArtifact(t, file("agents.yaml", crdYAML("agents", "example.com", "2.0.0")))
	if _, err := update(t, v1, src, root, "crds", WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Files of the folder that are not CRD files are never touched.
	kustomization := "resources:\n- agents.example.com.yaml\n- reports.example.com.yaml\n"
	if err := os.WriteFile(filepath.Join(root, "crds", "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "crds", "notes.example.com.yaml"), []byte("just: notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("kept", func(t *testing.T) {
		g := NewWithT(t)
		res, err := update(t, v2, src, root, "crds", WriteOptions{Version: "2.0.0", PreviousVersion: "1.0.0"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Removed).To(Equal([]Change{{Name: "reports.example.com", File: "crds/reports.example.com.yaml", OldVersion: "1.0.0"}}))
		g.Expect(res.Pruned).To(BeFalse())
		g.Expect(res.Summary()).To(Equal("crds: agents.example.com 1.0.0 --> 2.0.0, no longer shipped (kept): reports.example.com"))
		g.Expect(filepath.Join(root, "crds", "reports.example.com.yaml")).To(BeAnExistingFile())

		// Until pruned, it is reported again, but nothing is changed.
		res, err = update(t, v2, src, root, "crds", WriteOptions{Version: "2.0.0", PreviousVersion: "2.0.0"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Changed()).To(BeFalse())
		g.Expect(names(res.Removed)).To(Equal([]string{"reports.example.com"}))
	})
	t.Run("pruned", func(t *testing.T) {
		g := NewWithT(t)
		res, err := update(t, v2, src, root, "crds", WriteOptions{Prune: true, Version: "2.0.0", PreviousVersion: "2.0.0"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Changed()).To(BeTrue())
		g.Expect(res.Summary()).To(Equal("crds: pruned: reports.example.com"))
		g.Expect(snapshot(t, root)).To(Equal(map[string]string{
			"crds/agents.example.com.yaml": readFile(t, root, "crds/agents.example.com.yaml"),
			"crds/kustomization.yaml":      kustomization,
			"crds/notes.example.com.yaml":  "just: notes\n",
		}))
	})
}
