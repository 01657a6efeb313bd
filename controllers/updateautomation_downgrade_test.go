package controllers

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

func TestDowngradeIsRefusedUnlessAllowed(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0", "1.5.0", "2.0.0"}, map[string]string{
		"apps/agent.yaml":  withVersion(agentMarked, "2.0.0"),
		"apps/legacy.yaml": withVersion(agentMarked, "1.0.0"),
	})
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0 <2.0.0"))
	waitForLatestTag(t, pol, "1.5.0")
	base := f.tip("main")

	// The file at 2.0.0 stays; the one at 1.0.0 still moves up.
	auto := newAutomation(t, f.ns, f.url)
	sha := waitForPush(t, auto, "")
	g.Expect(f.log("main")).To(HaveLen(2))
	g.Expect(f.readFile("main", "apps/agent.yaml")).To(Equal(f.expand(withVersion(agentMarked, "2.0.0"))))
	g.Expect(f.readFile("main", "apps/legacy.yaml")).To(Equal(f.expand(withVersion(agentMarked, "1.5.0"))))
	g.Expect(f.commitField(sha, "%B")).To(Equal(f.expand("Update agent to 1.5.0\n\n" +
		"apps/legacy.yaml: IMAGE:1.0.0 --> IMAGE:1.5.0\n\nUprev-Update: NS/agent 1.0.0 --> 1.5.0")))
	refused := []uprevv1.RefusedDowngrade{{Policy: f.ns + "/agent", File: "apps/agent.yaml", Current: "2.0.0", Selected: "1.5.0"}}
	g.Eventually(func(g Gomega) {
		getAutomation(g, auto)
		g.Expect(auto.Status.RefusedDowngrades).To(Equal(refused))
		g.Expect(conditions.IsReady(auto)).To(BeTrue())
		g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(ContainSubstring("1 downgrades refused"))
	}).Should(Succeed())
	warning := corev1.EventTypeWarning + " DowngradeRefused: apps/agent.yaml: " + f.ns + "/agent stays at 2.0.0; the policy selects the lower 1.5.0 (set spec.allowDowngrade to allow it)"
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(automationEvents(g, f.ns, auto.Name))).To(ContainElement(warning))
	}).Should(Succeed())

	// Nothing more on the next run.
	st := runAutomation(t, auto)
	g.Expect(st.RefusedDowngrades).To(Equal(refused))
	g.Expect(st.LastPushCommit).To(Equal(sha))
	g.Expect(f.tip("main")).To(Equal(sha))

	updateAutomation(t, auto, func(a *uprevv1.UpdateAutomation) { a.Spec.AllowDowngrade = true })
	allowed := waitForPush(t, auto, sha)
	g.Expect(f.readFile("main", "apps/agent.yaml")).To(Equal(f.expand(withVersion(agentMarked, "1.5.0"))))
	g.Expect(f.commitField(allowed, "%s|%(trailers:key=Uprev-Update,valueonly)")).To(Equal("Update agent to 1.5.0|" + f.ns + "/agent 2.0.0 --> 1.5.0"))
	g.Expect(f.log("main")).To(HaveLen(3))
	g.Expect(f.log("main")[2].SHA).To(Equal(base))
	st = waitForReady(t, auto)
	g.Expect(st.RefusedDowngrades).To(BeEmpty())
}
