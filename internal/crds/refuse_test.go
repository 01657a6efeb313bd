package crds

import (
	"archive/tar"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"

	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// withFolder returns a checkout with a CRD folder written from an earlier
// release, and a kustomization next to it.
func withFolder(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	img := fluxArtifact(t, file("agents.yaml", crdYAML("agents", "example.com", "1.0.0")))
	if _, err := update(t, img, Source{ArtifactMediaType: FluxContentMediaType}, root, "crds", WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestHostileArtifactsAreRefusedAndNothingIsWritten(t *testing.T) {
	newCRD := crdYAML("policies", "example.com", "2.0.0")
	flux := Source{ArtifactMediaType: FluxContentMediaType}
	image := Source{ImagePath: "/crds"}
	named := func(name string) string {
		return strings.Replace(newCRD, "name: policies.example.com", "name: "+name, 1)
	}
	for _, tc := range []struct {
		name  string
		img   func(t *testing.T) v1.Image
		src   Source
		want  error
		entry string
	}{
		{"entry climbing out with ../", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("crds/policies.yaml", newCRD), file("../../etc/cron.d/evil.yaml", newCRD))
		}, flux, ErrUnsafePath, "../../etc/cron.d/evil.yaml"},
		{".. in the middle of a path", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("crds/../../evil.yaml", newCRD))
		}, flux, ErrUnsafePath, "crds/../../evil.yaml"},
		{"absolute path", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("/etc/evil.yaml", newCRD))
		}, flux, ErrUnsafePath, "/etc/evil.yaml"},
		{"symbolic link out of the archive", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("policies.yaml", newCRD), entry{Name: "crds/passwd.yaml", Type: tar.TypeSymlink, Link: "../../etc/passwd"})
		}, flux, ErrUnsafePath, "crds/passwd.yaml"},
		{"symbolic link to an absolute path", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("policies.yaml", newCRD), entry{Name: "passwd.yaml", Type: tar.TypeSymlink, Link: "/etc/passwd"})
		}, flux, ErrUnsafePath, "passwd.yaml"},
		{"hard link out of the archive", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("policies.yaml", newCRD), entry{Name: "shadow.yaml", Type: tar.TypeLink, Link: "../etc/shadow"})
		}, flux, ErrUnsafePath, "shadow.yaml"},
		{"symbolic link out of the image folder", func(t *testing.T) v1.Image {
			return testregistry.ImageOf(t, imageLayer(t, file("crds/policies.yaml", newCRD), entry{Name: "crds/shadow.yaml", Type: tar.TypeSymlink, Link: "/etc/shadow"}))
		}, image, ErrUnsafePath, "crds/shadow.yaml"},
		{"hard link out of the image folder", func(t *testing.T) v1.Image {
			return testregistry.ImageOf(t, imageLayer(t, file("etc/shadow", "x"), entry{Name: "crds/shadow.yaml", Type: tar.TypeLink, Link: "etc/shadow"}))
		}, image, ErrUnsafePath, "crds/shadow.yaml"},
		{"image folder that is a link", func(t *testing.T) v1.Image {
			return testregistry.ImageOf(t, imageLayer(t, file("etc/policies.yaml", newCRD), entry{Name: "crds", Type: tar.TypeSymlink, Link: "etc"}))
		}, image, ErrUnsafePath, "crds"},
		{"invalid YAML", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("policies.yaml", newCRD), file("broken.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: [CustomResourceDefinition\n"))
		}, flux, ErrInvalidYAML, "broken.yaml"},
		{"duplicate keys", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("policies.yaml", newCRD+"kind: ClusterRoleBinding\n"))
		}, flux, ErrInvalidYAML, "policies.yaml"},
		{"CRD name that is a path", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("policies.yaml", named("../../.git/hooks/pre-commit")))
		}, flux, ErrInvalidCRD, "policies.yaml"},
		{"CRD name in upper case", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("policies.yaml", named("Policies.example.com")))
		}, flux, ErrInvalidCRD, "policies.yaml"},
		{"CRD name other than plural.group", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("policies.yaml", named("agents.example.com")))
		}, flux, ErrInvalidCRD, "policies.yaml"},
		{"CRD without a name", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("policies.yaml", named("")))
		}, flux, ErrInvalidCRD, "policies.yaml"},
		{"CRD defined twice", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("a/policies.yaml", newCRD), file("b/policies.yaml", newCRD))
		}, flux, ErrDuplicateCRD, "b/policies.yaml"},
		{"no CRD at all", func(t *testing.T) v1.Image {
			return fluxArtifact(t, file("rbac.yaml", clusterRoleBindingYAML))
		}, flux, ErrNoCRDs, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			root := withFolder(t)
			before := snapshot(t, root)
			_, err := update(t, tc.img(t), tc.src, root, "crds", WriteOptions{Prune: true})
			g.Expect(err).To(MatchError(tc.want))
			var refused *ArtifactError
			g.Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
			g.Expect(refused.Path).To(Equal(tc.entry))
			g.Expect(snapshot(t, root)).To(Equal(before))
		})
	}
}

func TestBrokenArchiveIsRefused(t *testing.T) {
	g := NewWithT(t)
	data := testregistry.Gzip(t, tarBytes(t, file("policies.yaml", crdYAML("policies", "example.com", "1.0.0"))))
	_, err := Extract(t.Context(), testregistry.Artifact(t, fluxConfigMediaType, FluxContentMediaType, data[:len(data)/2]), Source{ArtifactMediaType: FluxContentMediaType}, Options{})
	g.Expect(err).To(MatchError(ErrInvalidArchive))
	_, err = Extract(t.Context(), testregistry.Artifact(t, fluxConfigMediaType, FluxContentMediaType, []byte("this is not a tar archive, and it is long enough to be read as one, almost. "+strings.Repeat("x", 600))), Source{ArtifactMediaType: FluxContentMediaType}, Options{})
	g.Expect(err).To(MatchError(ErrInvalidArchive))
}

func TestTooManyFilesAreRefused(t *testing.T) {
	g := NewWithT(t)
	var entries []entry
	for i := range 11 {
		entries = append(entries, file(fmt.Sprintf("crds/f%d.txt", i), "x"))
	}
	entries = append(entries, file("crds/policies.yaml", crdYAML("policies", "example.com", "1.0.0")))
	_, err := Extract(t.Context(), fluxArtifact(t, entries...), Source{ArtifactMediaType: FluxContentMediaType}, Options{MaxFiles: 10})
	g.Expect(err).To(MatchError(ErrTooManyFiles))
	g.Expect(err.Error()).To(ContainSubstring("more than 10 entries"))

	// In an image, only the entries of the CRD folder count.
	var layer []entry
	for i := range 50 {
		layer = append(layer, file(fmt.Sprintf("usr/share/f%d", i), "x"))
	}
	layer = append(layer, file("crds/policies.yaml", crdYAML("policies", "example.com", "1.0.0")))
	bundle, err := Extract(t.Context(), testregistry.ImageOf(t, imageLayer(t, layer...)), Source{ImagePath: "/crds"}, Options{MaxFiles: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bundle.CRDs).To(HaveLen(1))
}

func TestLayerOverTheLimitIsRefused(t *testing.T) {
	const limit = 1 << 20
	filler := make([]byte, 2*limit)
	if _, err := rand.Read(filler); err != nil {
		t.Fatal(err)
	}
	crd := crdYAML("policies", "example.com", "1.0.0")

	t.Run("image layer from the registry", func(t *testing.T) {
		g := NewWithT(t)
		r := testregistry.Start(t)
		root := withFolder(t)
		before := snapshot(t, root)
		img := testregistry.ImageOf(t, imageLayer(t, file("crds/policies.yaml", crd), entry{Name: "usr/lib/big", Body: string(filler)}))
		pulled := pushAndPull(t, r, "acme/big", "1.0.0", img)
		_, err := Extract(t.Context(), pulled, Source{ImagePath: "/crds"}, Options{MaxLayerSize: limit})
		g.Expect(err).To(MatchError(ErrTooLarge))
		g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("more than %d bytes uncompressed", limit)))
		g.Expect(snapshot(t, root)).To(Equal(before))
	})
	t.Run("gzip bomb", func(t *testing.T) {
		g := NewWithT(t)
		zeros := testregistry.Gzip(t, tarBytes(t, file("policies.yaml", crd), entry{Name: "zeros", Body: string(make([]byte, 16*limit))}))
		g.Expect(len(zeros)).To(BeNumerically("<", limit/16))
		_, err := Extract(t.Context(), testregistry.Artifact(t, fluxConfigMediaType, FluxContentMediaType, zeros), Source{ArtifactMediaType: FluxContentMediaType}, Options{MaxLayerSize: limit})
		g.Expect(err).To(MatchError(ErrTooLarge))
	})
	t.Run("YAML files adding up over the limit", func(t *testing.T) {
		g := NewWithT(t)
		big := crd + "---\n# " + strings.Repeat("x", limit/2) + "\n"
		img := fluxArtifact(t, file("a.yaml", big), file("b.yaml", big), file("c.yaml", big))
		_, err := Extract(t.Context(), img, Source{ArtifactMediaType: FluxContentMediaType}, Options{MaxLayerSize: limit + limit/5})
		g.Expect(err).To(MatchError(ErrTooLarge))
		g.Expect(err.Error()).To(ContainSubstring("c.yaml"))
	})
	t.Run("the default limit lets a normal layer through", func(t *testing.T) {
		g := NewWithT(t)
		img := testregistry.ImageOf(t, imageLayer(t, file("crds/policies.yaml", crd), entry{Name: "usr/lib/big", Body: string(filler)}))
		_, err := Extract(t.Context(), img, Source{ImagePath: "/crds"}, Options{})
		g.Expect(err).NotTo(HaveOccurred())
	})
}
