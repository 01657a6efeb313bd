package crds

import (
	"archive/tar"
	"testing"

	. "github.com/onsi/gomega"

	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

func TestFluxArtifactKeepsOnlyCRDs(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	root := t.TempDir()
	img := fluxArtifact(t,
		entry{Name: "./", Type: tar.TypeDir},
		file("./crds/agents.yaml", crdYAML("agents", "example.com", "2.0.0")),
		// Several documents in one file, one of them empty.
		file("./crds/more.yml", "---\n"+crdYAML("policies", "example.com", "2.0.0")+"---\n---\n"+crdYAML("reports", "example.com", "2.0.0")),
		file("./rbac.yaml", clusterRoleBindingYAML),
		file("./kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [crds]\n"),
		file("./old-crd.yaml", "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata: {name: olds.example.com}\n"),
		file("./deploy/agent.json", `{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "agent"}}`),
		// A link that stays in the archive is skipped, not followed.
		entry{Name: "./crds/same.yaml", Type: tar.TypeSymlink, Link: "agents.yaml"},
	)
	pulled := pushAndPull(t, r, "acme/agent-manifests", "2.0.0", img)
	res, err := update(t, pulled, Source{ArtifactMediaType: FluxContentMediaType}, root, "crds", WriteOptions{Version: "2.0.0"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(res.Added)).To(Equal([]string{"agents.example.com", "policies.example.com", "reports.example.com"}))
	g.Expect(res.Ignored).To(Equal(4))
	g.Expect(res.IgnoredKinds).To(Equal(map[string]int{
		"rbac.authorization.k8s.io/v1 ClusterRoleBinding":       1,
		"kustomize.config.k8s.io/v1beta1 Kustomization":         1,
		"apiextensions.k8s.io/v1beta1 CustomResourceDefinition": 1,
		"apps/v1 Deployment": 1,
	}))
	g.Expect(snapshot(t, root)).To(HaveLen(3))
	g.Expect(res.Summary()).To(Equal("crds: new: agents.example.com, policies.example.com, reports.example.com"))
}

func TestArtifactWithoutTheLayerIsRefused(t *testing.T) {
	g := NewWithT(t)
	img := fluxArtifact(t, file("agents.yaml", crdYAML("agents", "example.com", "1.0.0")))
	_, err := Extract(t.Context(), img, Source{ArtifactMediaType: "application/vnd.acme.crds.v1.tar+gzip"}, Options{})
	g.Expect(err).To(MatchError(ErrWrongArtifact))
	g.Expect(err.Error()).To(ContainSubstring("no layer of media type application/vnd.acme.crds.v1.tar+gzip"))
}

func TestSourceMustNameOneKind(t *testing.T) {
	g := NewWithT(t)
	img := fluxArtifact(t, file("agents.yaml", crdYAML("agents", "example.com", "1.0.0")))
	for _, src := range []Source{{}, {Chart: true, ImagePath: "/crds"}, {ImagePath: "/crds", ArtifactMediaType: FluxContentMediaType}} {
		_, err := Extract(t.Context(), img, src, Options{})
		g.Expect(err).To(MatchError(ErrInvalidSource), "%+v", src)
	}
	_, err := Extract(t.Context(), img, Source{ImagePath: "/crds/../etc"}, Options{})
	g.Expect(err).To(MatchError(ErrInvalidSource))
}
