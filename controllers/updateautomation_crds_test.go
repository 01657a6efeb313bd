package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// testCRD returns a CRD of plural.example.com labelled with version.
func testCRD(plural, kind, version string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.example.com
  labels:
    app.kubernetes.io/version: %[3]s
spec:
  group: example.com
  names: {kind: %[2]s, plural: %[1]s, singular: %[4]s, listKind: %[2]sList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: release %[3]s
        x-kubernetes-preserve-unknown-fields: true
`, plural, kind, version, strings.TrimSuffix(plural, "s"))
}

// agentRelease is a HelmRelease of chart agent at 1.0.0, whose version
// follows policy agent.
const agentRelease = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: agent\nspec:\n  chart:\n    spec:\n      chart: agent\n      version: 1.0.0 # {\"$imagepolicy\": \"NS:agent:tag\"}\n"

// withChartCRDs makes the automation write the CRDs that the chart of
// policy agent ships to clusters/agent/crds.
func withChartCRDs(a *uprevv1.UpdateAutomation) {
	a.Spec.CRDs = []uprevv1.CRDBundle{{
		PolicyRef: metaRef("agent"),
		From:      uprevv1.CRDSource{Chart: &uprevv1.ChartSource{}},
		Path:      "clusters/agent/crds",
	}}
}

// pushChart pushes a Helm chart "agent" of version to repo as Helm
// stores charts in OCI registries, with files under agent/.
func (f *automationFixture) pushChart(repo, version string, files map[string]string) {
	f.t.Helper()
	f.reg.Push(f.t, repo, version, registry.HelmChart(f.t, "agent", version, files))
}

func TestChartReleaseMovesVersionAndCRDsInOneCommit(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, nil, map[string]string{
		"clusters/agent/release.yaml": agentRelease,
	})
	chart := f.reg.Image("charts/agent")
	f.pushChart("charts/agent", "1.0.0", map[string]string{
		"crds/agents.yaml":             testCRD("agents", "Agent", "1.0.0"),
		"templates/deployment.yaml":    "kind: Deployment\n",
		"crds/clusterrolebinding.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: sneaky}\n",
	})
	chartRepo := newRepository(t, f.ns, chart, func(r *imagev1.ImageRepository) { r.Name = "chart" })
	newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0 <2.0.0"), func(p *imagev1.ImagePolicy) {
		p.Spec.ImageRepositoryRef.Name = "chart"
		p.Spec.DigestReflectionPolicy = imagev1.ReflectIfNotPresent
	})
	auto := newAutomation(t, f.ns, f.url, withChartCRDs)

	// The first run writes the CRDs of the release already in Git.
	g.Eventually(func(g Gomega) {
		g.Expect(f.log("main")[0].Subject).To(Equal("Update CRDs"))
	}).Should(Succeed())
	g.Expect(f.readFile("main", "clusters/agent/crds/agents.example.com.yaml")).To(ContainSubstring("release 1.0.0"))

	f.pushChart("charts/agent", "1.1.0", map[string]string{
		"crds/agents.yaml":   testCRD("agents", "Agent", "1.1.0"),
		"crds/policies.yaml": testCRD("policies", "Policy", "1.1.0"),
	})
	requestReconcile(t, chartRepo)
	var bump string
	g.Eventually(func(g Gomega) {
		commits := f.log("main")
		g.Expect(commits[0].Subject).To(Equal("Update agent to 1.1.0"))
		bump = commits[0].SHA
		g.Expect(commits[0].Body).To(ContainSubstring("crds: agents.example.com 1.0.0 --> 1.1.0, new: policies.example.com"))
		g.Expect(commits[0].Body).To(ContainSubstring(fmt.Sprintf("Uprev-Update: %s/agent 1.0.0 --> 1.1.0", f.ns)))
	}).Should(Succeed())

	changed := f.git.Git(t, fleetRepo, "show", "--name-only", "--format=", bump)
	g.Expect(strings.Fields(changed)).To(ConsistOf(
		"clusters/agent/release.yaml",
		"clusters/agent/crds/agents.example.com.yaml",
		"clusters/agent/crds/policies.example.com.yaml",
	), "the version and its CRDs move in one commit")
	g.Expect(f.readFile("main", "clusters/agent/release.yaml")).To(ContainSubstring("version: 1.1.0 # {"))
	g.Expect(f.readFile("main", "clusters/agent/crds/agents.example.com.yaml")).To(ContainSubstring("release 1.1.0"))

	g.Eventually(func(g Gomega) {
		status := getAutomation(g, auto).Status
		g.Expect(status.LastPushCommit).To(Equal(bump))
		g.Expect(status.CRDs).To(HaveLen(1))
		g.Expect(status.CRDs[0].Version).To(Equal("1.1.0"))
		g.Expect(status.CRDs[0].CRDs).To(Equal(2))
	}).Should(Succeed())

	// A run with nothing new makes no commit: the CRDs are written the same
	// way every time. Nor does it pull the artifact again: its digest has
	// not changed.
	f.reg.ResetCounts()
	requestReconcile(t, auto)
	g.Eventually(func(g Gomega) {
		getAutomation(g, auto)
		token := auto.Annotations["reconcile.fluxcd.io/requestedAt"]
		g.Expect(auto.Status.LastHandledReconcileAt).To(Equal(token))
	}).Should(Succeed())
	g.Expect(f.log("main")[0].SHA).To(Equal(bump))
	g.Expect(f.reg.Counts().ManifestGet).To(BeZero(), "an artifact already read is not pulled again")
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(auto), auto)).To(Succeed())
	g.Expect(auto.Status.Conditions).To(ContainElement(HaveField("Status", metav1.ConditionTrue)))
}
