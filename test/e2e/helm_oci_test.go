package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// fluxStandInCRD returns a CRD accepting any object of kind in group, a
// stand-in for the Flux CRD the helm-oci example expects in the cluster
// (Flux's controllers are not part of this suite).
func fluxStandInCRD(group, version, kind, plural string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[4]s.%[1]s
spec:
  group: %[1]s
  names: {kind: %[3]s, listKind: %[3]sList, plural: %[4]s, singular: %[5]s}
  scope: Namespaced
  versions:
  - name: %[2]s
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group, version, kind, plural, strings.ToLower(kind))
}

// installFluxStandIns installs the stand-ins of Flux's HelmRepository and
// HelmRelease CRDs in the cluster uprev runs in.
func installFluxStandIns(t testing.TB) {
	t.Helper()
	for _, doc := range []string{
		fluxStandInCRD("source.toolkit.fluxcd.io", "v1", "HelmRepository", "helmrepositories"),
		fluxStandInCRD("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases"),
	} {
		crd := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal([]byte(doc), &crd.Object); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("installing %s: %v", crd.GetName(), err)
		}
	}
}

// helmReleaseVersion returns spec.chart.spec.version of HelmRelease
// ns/name in the cluster uprev runs in.
func helmReleaseVersion(g Gomega, ns, name string) string {
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"})
	g.ExpectWithOffset(1, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, hr)).To(Succeed())
	version, _, _ := unstructured.NestedString(hr.Object, "spec", "chart", "spec", "version")
	return version
}

// TestHelmChartsFollowTheirRanges runs examples/helm-oci: two charts stored
// in an OCI registry follow `>=1.0.0 <2.0.0` and `>=3.7.0 <3.8.0`;
// versions outside the ranges and prereleases are ignored; the `:tag`
// markers move the HelmReleases' chart versions and nothing else.
func TestHelmChartsFollowTheirRanges(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const example = "helm-oci"
	s := newScenario(t, example)
	s.rename(example, s.ns)
	platform := s.ns + "-platform"
	s.rename("platform-system", platform)
	installFluxStandIns(t)

	pushCharts := func(chart string, versions ...string) {
		for _, v := range versions {
			s.reg.Push(t, "charts/"+chart, v, helmChart(t, chart, v))
		}
	}
	pushCharts("agent", "0.9.0", "1.0.0", "1.2.0", "1.10.1", "1.11.0-rc.1", "2.0.0")
	pushCharts("mesh", "3.6.9", "3.7.0", "3.7.4", "3.8.0-rc.1", "3.8.0", "4.0.0")
	fleet := s.exampleFleet(example)
	s.initRepo(fleet)
	objs := s.exampleObjects(example)
	agentRepo := object[*imagev1.ImageRepository](t, objs, "agent-chart")
	meshRepo := object[*imagev1.ImageRepository](t, objs, "mesh-chart")
	agentPol := object[*imagev1.ImagePolicy](t, objs, "agent")
	meshPol := object[*imagev1.ImagePolicy](t, objs, "mesh")
	auto := object[*uprevv1.UpdateAutomation](t, objs, "charts")
	sync := object[*uprevv1.Sync](t, objs, "platform")
	create(t, agentRepo, meshRepo, agentPol, meshPol)
	waitForTag(t, agentPol, "1.10.1")
	waitForTag(t, meshPol, "3.7.4")
	create(t, auto, sync)

	// One commit moves both charts to the highest version in range, and
	// changes nothing but the version fields.
	first := waitForPush(t, auto, "")
	g.Expect(s.subjects("main")).To(Equal([]string{"Update 2 images", "Initial commit"}))
	g.Expect(s.message(first)).To(Equal(fmt.Sprintf("Update 2 images\n\n"+
		"clusters/platform/agent.yaml: 1.0.0 --> 1.10.1\n"+
		"clusters/platform/mesh.yaml: 3.7.0 --> 3.7.4\n\n"+
		"Uprev-Update: %[1]s/agent 1.0.0 --> 1.10.1\n"+
		"Uprev-Update: %[1]s/mesh 3.7.0 --> 3.7.4", s.ns)))
	g.Expect(s.readFile("main", "clusters/platform/agent.yaml")).To(Equal(
		strings.Replace(fleet["clusters/platform/agent.yaml"], "version: 1.0.0 #", "version: 1.10.1 #", 1)))
	g.Expect(s.readFile("main", "clusters/platform/mesh.yaml")).To(Equal(
		strings.Replace(fleet["clusters/platform/mesh.yaml"], "version: 3.7.0 #", "version: 3.7.4 #", 1)))
	waitApplied(t, sync, first, "local")
	g.Expect(helmReleaseVersion(g, platform, "agent")).To(Equal("1.10.1"))
	g.Expect(helmReleaseVersion(g, platform, "mesh")).To(Equal("3.7.4"))

	// New releases of both charts, in and out of range: only agent's
	// 1.10.2 is in a range.
	pushCharts("agent", "2.1.0", "1.10.2", "1.11.0-rc.2")
	pushCharts("mesh", "3.8.1", "3.9.0", "3.7.5-rc.1")
	requestReconcile(t, meshRepo)
	requestReconcile(t, agentRepo)
	second := waitForPush(t, auto, first)
	waitForScan(t, meshRepo, 9)
	g.Expect(waitForTag(t, meshPol, "3.7.4")).To(HaveSuffix(":3.7.4"))
	g.Expect(runAutomation(t, auto).LastPushCommit).To(Equal(second))
	g.Expect(s.subjects("main")).To(Equal([]string{"Update agent to 1.10.2", "Update 2 images", "Initial commit"}))
	g.Expect(s.changedFiles(second)).To(Equal([]string{"clusters/platform/agent.yaml"}))
	waitApplied(t, sync, second, "local")
	g.Expect(helmReleaseVersion(g, platform, "agent")).To(Equal("1.10.2"))
	g.Expect(helmReleaseVersion(g, platform, "mesh")).To(Equal("3.7.4"))
}
