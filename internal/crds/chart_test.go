package crds

import (
	"testing"

	. "github.com/onsi/gomega"

	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

func TestChartCRDsFollowTheRelease(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	root := t.TempDir()
	const dir = "clusters/base/agent-crds"

	first := helmChart(t, "agent", "1.4.1", map[string]string{"agents.yaml": crdYAML("agents", "example.com", "1.4.1")})
	res, err := update(t, pushAndPull(t, r, "charts/agent", "1.4.1", first), Source{Chart: true}, root, dir, WriteOptions{Version: "1.4.1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Added).To(Equal([]Change{{Name: "agents.example.com", File: dir + "/agents.example.com.yaml", NewVersion: "1.4.1"}}))
	g.Expect(res.Summary()).To(Equal("crds: new: agents.example.com"))
	written := readFile(t, root, dir+"/agents.example.com.yaml")
	g.Expect(written).To(HavePrefix("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n"))
	g.Expect(written).NotTo(ContainSubstring("status:"))
	g.Expect(written).NotTo(ContainSubstring("creationTimestamp"))

	// The next release changes the CRD and adds one, in a subfolder of
	// crds/ and next to a document that is not a CRD.
	second := helmChart(t, "agent", "1.4.2", map[string]string{
		"agents.yaml":         crdYAML("agents", "example.com", "1.4.2"),
		"extra/policies.yaml": crdYAML("policies", "example.com", "1.4.2") + "---\n" + clusterRoleBindingYAML,
		"README.md":           "# not YAML, skipped\n",
		"extra/values.schema": "{}",
	})
	res, err = update(t, pushAndPull(t, r, "charts/agent", "1.4.2", second), Source{Chart: true}, root, dir, WriteOptions{Version: "1.4.2", PreviousVersion: "1.4.1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Summary()).To(Equal("crds: agents.example.com 1.4.1 --> 1.4.2, new: policies.example.com"))
	g.Expect(res.Changed()).To(BeTrue())
	g.Expect(res.Ignored).To(Equal(1))
	g.Expect(res.IgnoredKinds).To(Equal(map[string]int{"rbac.authorization.k8s.io/v1 ClusterRoleBinding": 1}))
	// Only the CRDs of crds/ are written: not the one in templates/, not
	// the ClusterRoleBinding.
	g.Expect(snapshot(t, root)).To(HaveLen(2))
	g.Expect(snapshot(t, root)).To(HaveKey(dir + "/policies.example.com.yaml"))
	g.Expect(readFile(t, root, dir+"/agents.example.com.yaml")).To(ContainSubstring(`app.kubernetes.io/version: 1.4.2`))
}

func TestChartSourceRefusesWhatIsNotAChart(t *testing.T) {
	g := NewWithT(t)
	img := fluxArtifact(t, file("agents.yaml", crdYAML("agents", "example.com", "1.0.0")))
	_, err := Extract(t.Context(), img, Source{Chart: true}, Options{})
	g.Expect(err).To(MatchError(ErrWrongArtifact))
	g.Expect(err.Error()).To(ContainSubstring("not a Helm chart"))
}

func TestChartWithoutCRDsIsAnError(t *testing.T) {
	g := NewWithT(t)
	img := helmChart(t, "agent", "1.0.0", nil)
	_, err := Extract(t.Context(), img, Source{Chart: true}, Options{})
	g.Expect(err).To(MatchError(ErrNoCRDs))
}
