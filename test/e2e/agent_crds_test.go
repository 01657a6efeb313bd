package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// acmeCRD returns the CRD of kind in group acme.example.com as release
// version of the agent ships it.
func acmeCRD(plural, kind, version string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.acme.example.com
spec:
  group: acme.example.com
  names: {kind: %[2]s, listKind: %[2]sList, plural: %[1]s, singular: %[3]s}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: %[2]s, as of agent %[4]s
        x-kubernetes-preserve-unknown-fields: true
`, plural, kind, strings.ToLower(kind), version)
}

// agentRelease returns the release image of the agent: the binary in one
// layer, and in another the CRDs of the release under /crds, next to a
// document that is not a CRD and must never reach Git.
func agentRelease(t testing.TB, version string, crdFiles map[string]string) v1.Image {
	t.Helper()
	crdFiles["crds/rbac.yaml"] = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: agent-admin}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n"
	return registry.ImageOf(t,
		imageLayer(t, map[string]string{"usr/local/bin/agent": "agent " + version + "\n"}),
		imageLayer(t, crdFiles),
	)
}

// TestAgentWithCRDsFollowsAnOCIRelease runs examples/agent-with-crds: the
// agent and its controller follow the release image, pinned by digest; the
// CRDs inside that image are written in the same commit; and the Sync puts
// the CRDs in before the objects of their kinds, in one revision.
func TestAgentWithCRDsFollowsAnOCIRelease(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const example = "agent-with-crds"
	s := newScenario(t, example)
	s.rename(example, s.ns)
	agents := s.ns + "-agents"
	s.rename("agent-system", agents)
	image := s.reg.Image("acme/agent")

	d100 := s.reg.Push(t, "acme/agent", "1.0.0", agentRelease(t, "1.0.0", map[string]string{
		"crds/agents.yaml": acmeCRD("agents", "Agent", "1.0.0"),
	}))
	s.initRepo(s.exampleFleet(example))
	objs := s.exampleObjects(example)
	repo := object[*imagev1.ImageRepository](t, objs, "agent")
	pol := object[*imagev1.ImagePolicy](t, objs, "agent")
	auto := object[*uprevv1.UpdateAutomation](t, objs, "agent")
	sync := object[*uprevv1.Sync](t, objs, "agent")
	create(t, repo, pol, auto)

	// The first run pins the release in Git by digest and brings its CRDs,
	// in one commit.
	pin := waitForPush(t, auto, "")
	g.Expect(s.subjects("main")).To(Equal([]string{"Update agent to 1.0.0@" + d100, "Initial commit"}))
	g.Expect(s.changedFiles(pin)).To(ConsistOf(
		"clusters/agent/agent.yaml",
		"clusters/agent/controller.yaml",
		"clusters/agent/crds/agents.acme.example.com.yaml",
	), "the CRD is written, the ClusterRoleBinding next to it is not")
	g.Expect(s.message(pin)).To(ContainSubstring("crds: new: agents.acme.example.com"))
	for _, file := range []string{"agent.yaml", "controller.yaml"} {
		g.Expect(s.readFile("main", "clusters/agent/"+file)).To(ContainSubstring(
			fmt.Sprintf(`image: %s:1.0.0@%s # {"$imagepolicy": "%s:agent"}`, image, d100, s.ns)))
	}
	g.Eventually(func(g Gomega) {
		get(g, auto)
		g.Expect(auto.Status.CRDs).To(ConsistOf(HaveField("Ignored", 1)))
	}).Should(Succeed())

	// The Sync applies that revision whole: the CRD first, then the Agent
	// object of its kind, and the Deployments.
	create(t, sync)
	waitApplied(t, sync, pin, "local")
	g.Expect(crdDescription(g, "agents.acme.example.com")).To(Equal("Agent, as of agent 1.0.0"))
	agent := &unstructured.Unstructured{}
	agent.SetGroupVersionKind(schema.GroupVersionKind{Group: "acme.example.com", Version: "v1", Kind: "Agent"})
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: agents, Name: "default"}, agent)).To(Succeed())
	g.Expect(agent.Object["spec"]).To(HaveKeyWithValue("logLevel", "info"))
	pinned := image + ":1.0.0@" + d100
	waitForImage(t, agents, "agent", pinned, k8s)
	waitForImage(t, agents, "agent-controller", pinned, k8s)

	// The next release changes the CRD and ships a new one.
	d110 := s.reg.Push(t, "acme/agent", "1.1.0", agentRelease(t, "1.1.0", map[string]string{
		"crds/agents.yaml":        acmeCRD("agents", "Agent", "1.1.0"),
		"crds/agentpolicies.yaml": acmeCRD("agentpolicies", "AgentPolicy", "1.1.0"),
	}))
	requestReconcile(t, repo)
	bump := waitForPush(t, auto, pin)
	g.Expect(s.subjects("main")).To(Equal([]string{"Update agent to 1.1.0", "Update agent to 1.0.0@" + d100, "Initial commit"}))
	g.Expect(s.changedFiles(bump)).To(ConsistOf(
		"clusters/agent/agent.yaml",
		"clusters/agent/controller.yaml",
		"clusters/agent/crds/agents.acme.example.com.yaml",
		"clusters/agent/crds/agentpolicies.acme.example.com.yaml",
	), "the version and its CRDs move in one commit")
	msg := s.message(bump)
	g.Expect(msg).To(ContainSubstring("crds: agents.acme.example.com 1.0.0 --> 1.1.0, new: agentpolicies.acme.example.com"))
	g.Expect(msg).To(HaveSuffix(fmt.Sprintf("\n\nUprev-Update: %s/agent 1.0.0 --> 1.1.0", s.ns)))

	waitApplied(t, sync, bump, "local")
	waitForImage(t, agents, "agent", image+":1.1.0@"+d110, k8s)
	waitForImage(t, agents, "agent-controller", image+":1.1.0@"+d110, k8s)
	g.Expect(crdDescription(g, "agents.acme.example.com")).To(Equal("Agent, as of agent 1.1.0"))
	g.Expect(crdDescription(g, "agentpolicies.acme.example.com")).To(Equal("AgentPolicy, as of agent 1.1.0"))
}

// crdDescription returns the schema description of the CRD name in the
// cluster uprev runs in.
func crdDescription(g Gomega, name string) string {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	g.ExpectWithOffset(1, k8s.Get(context.Background(), client.ObjectKey{Name: name}, crd)).To(Succeed())
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	g.ExpectWithOffset(1, versions).To(HaveLen(1))
	desc, _, _ := unstructured.NestedString(versions[0].(map[string]any), "schema", "openAPIV3Schema", "description")
	return desc
}
