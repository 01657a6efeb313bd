package crds

import (
	"archive/tar"
	"testing"

	. "github.com/onsi/gomega"

	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

func TestImageLayersAreFlattenedWithWhiteouts(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	root := t.TempDir()
	img := testregistry.ImageOf(t,
		imageLayer(t,
			entry{Name: "bin/", Type: tar.TypeDir},
			file("bin/agent", "\x7fELF..."),
			entry{Name: "crds/", Type: tar.TypeDir},
			file("crds/agents.yaml", crdYAML("agents", "example.com", "1.0.0")),
			file("crds/olds.yaml", crdYAML("olds", "example.com", "1.0.0")),
			file("crds/legacy/legacies.yaml", crdYAML("legacies", "example.com", "1.0.0")),
		),
		imageLayer(t,
			// Removes olds.yaml from the layer below.
			file("crds/.wh.olds.yaml", ""),
			// Replaces agents.yaml.
			file("crds/agents.yaml", crdYAML("agents", "example.com", "2.0.0")),
			// Hides what the layers below have in crds/legacy, but not
			// what this layer adds there.
			file("crds/legacy/.wh..wh..opq", ""),
			file("crds/legacy/freshes.yaml", crdYAML("freshes", "example.com", "2.0.0")),
			// Outside the path: never read.
			file("etc/crds.yaml", crdYAML("others", "example.com", "2.0.0")),
		),
		imageLayer(t,
			file("./crds/policies.yaml", crdYAML("policies", "example.com", "2.0.0")),
			file("crds/README.md", "not YAML\n"),
			entry{Name: "crds/current.yaml", Type: tar.TypeSymlink, Link: "agents.yaml"},
			// Links outside the path are the image's business.
			entry{Name: "bin/sh", Type: tar.TypeSymlink, Link: "/bin/busybox"},
			entry{Name: "etc/alias", Type: tar.TypeSymlink, Link: "../../../../etc/passwd"},
		),
	)
	res, err := update(t, pushAndPull(t, r, "acme/agent", "2.0.0", img), Source{ImagePath: "/crds"}, root, "crds", WriteOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(res.Added)).To(Equal([]string{"agents.example.com", "freshes.example.com", "policies.example.com"}))
	g.Expect(readFile(t, root, "crds/agents.example.com.yaml")).To(ContainSubstring("app.kubernetes.io/version: 2.0.0"))
}

func TestImageWhiteoutOfTheFolderHidesLowerLayers(t *testing.T) {
	g := NewWithT(t)
	img := testregistry.ImageOf(t,
		imageLayer(t, file("opt/crds/olds.yaml", crdYAML("olds", "example.com", "1.0.0"))),
		imageLayer(t, file("opt/.wh.crds", "")),
		imageLayer(t, file("opt/crds/news.yaml", crdYAML("news", "example.com", "2.0.0"))),
	)
	bundle, err := Extract(t.Context(), img, Source{ImagePath: "/opt/crds/"}, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bundle.CRDs).To(HaveLen(1))
	g.Expect(bundle.CRDs[0].Name).To(Equal("news.example.com"))
	g.Expect(bundle.CRDs[0].Source).To(Equal("opt/crds/news.yaml"))
}

func TestImageFileReplacingAParentHidesLowerLayers(t *testing.T) {
	g := NewWithT(t)
	img := testregistry.ImageOf(t,
		imageLayer(t, file("crds/olds.yaml", crdYAML("olds", "example.com", "1.0.0"))),
		// crds is a file now: nothing of the lower crds/ folder is left.
		imageLayer(t, file("crds", "a file\n")),
	)
	_, err := Extract(t.Context(), img, Source{ImagePath: "/crds"}, Options{})
	g.Expect(err).To(MatchError(ErrNoCRDs))
}
