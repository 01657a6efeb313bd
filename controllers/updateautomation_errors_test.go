package controllers

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// brokenYAML holds a marker but does not parse.
const brokenYAML = `image: IMAGE:1.0.0 # {"$imagepolicy": "NS:agent"}
  extra: [unclosed
`

func TestUnparsableFileIsReportedAndOtherFilesAreCommitted(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{
		"apps/agent.yaml":  withVersion(agentMarked, "1.0.0"),
		"apps/broken.yaml": brokenYAML,
	})
	waitForLatestTag(t, newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0")), "1.1.0")
	auto := newAutomation(t, f.ns, f.url)

	sha := waitForPush(t, auto, "")
	g.Expect(f.tip("main")).To(Equal(sha))
	g.Expect(f.readFile("main", "apps/agent.yaml")).To(Equal(f.expand(withVersion(agentMarked, "1.1.0"))))
	g.Expect(f.readFile("main", "apps/broken.yaml")).To(Equal(f.expand(brokenYAML)), "left as it was")
	g.Expect(f.commitField(sha, "%b")).NotTo(ContainSubstring("broken.yaml"))

	expectUpdateFailed := func(g Gomega) {
		c := readyCondition(g, auto)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.UpdateFailedReason))
		g.Expect(c.Message).To(ContainSubstring("apps/broken.yaml"))
		g.Expect(conditions.IsStalled(auto)).To(BeFalse())
	}
	g.Eventually(expectUpdateFailed).Should(Succeed())
	g.Expect(auto.Status.LastPushCommit).To(Equal(sha))
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(automationEvents(g, f.ns, auto.Name))).To(ContainElement(
			And(HavePrefix("Warning "+uprevv1.UpdateFailedReason+": "), ContainSubstring("apps/broken.yaml"))))
	}).Should(Succeed())

	runAutomation(t, auto)
	expectUpdateFailed(g)
	g.Expect(f.tip("main")).To(Equal(sha), "no further commit")
}

func TestPolicyNotReadyIsSkipped(t *testing.T) {
	g := NewWithT(t)
	ghost := `image: IMAGE:0.1.0 # {"$imagepolicy": "NS:ghost"}
tag: "0.1.0" # {"$imagepolicy": "NS:ghost:tag"}
`
	f := newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{
		"apps/agent.yaml": withVersion(agentMarked, "1.0.0"),
		"apps/ghost.yaml": ghost,
	})
	waitForLatestTag(t, newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0")), "1.1.0")
	pending := newPolicy(t, f.ns, "ghost", semverChoice(">=9.0.0"))
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, pending)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(pending.Status.LatestRef).To(BeNil())
	}).Should(Succeed())

	auto := newAutomation(t, f.ns, f.url)
	sha := waitForPush(t, auto, "")
	g.Expect(f.readFile("main", "apps/agent.yaml")).To(Equal(f.expand(withVersion(agentMarked, "1.1.0"))))
	g.Expect(f.readFile("main", "apps/ghost.yaml")).To(Equal(f.expand(ghost)), "not written as empty")
	g.Expect(f.commitField(sha, "%s")).To(Equal("Update agent to 1.1.0"))
	st := waitForReady(t, auto)
	g.Expect(st.ObservedPolicies).To(HaveLen(1))
	g.Expect(st.ObservedPolicies).To(HaveKey("agent"))
	g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(Equal("pushed " + sha[:10] + " to main; skipped policies not ready: " + f.ns + "/ghost"))
}

func TestBadMessageTemplateStalls(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{"apps/agent.yaml": withVersion(agentMarked, "1.0.0")})
	waitForLatestTag(t, newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0")), "1.1.0")
	base := f.tip("main")

	auto := newAutomation(t, f.ns, f.url, func(a *uprevv1.UpdateAutomation) {
		a.Spec.Git.Commit.MessageTemplate = "{{ .Changes "
	})
	expectStalled := func(generation int64) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			c := readyCondition(g, auto)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(uprevv1.InvalidSpecReason))
			g.Expect(c.Message).To(ContainSubstring("spec.git.commit.messageTemplate"))
			g.Expect(conditions.IsStalled(auto)).To(BeTrue())
			g.Expect(conditions.IsReconciling(auto)).To(BeFalse())
			g.Expect(auto.Status.ObservedGeneration).To(Equal(generation))
		}).Should(Succeed())
		g.Expect(f.tip("main")).To(Equal(base), "nothing pushed")
		g.Expect(auto.Status.LastPushCommit).To(BeEmpty())
	}
	expectStalled(1)

	// A template that parses but cannot run on the commit data.
	updateAutomation(t, auto, func(a *uprevv1.UpdateAutomation) { a.Spec.Git.Commit.MessageTemplate = "{{ .NoSuchField }}" })
	expectStalled(2)

	updateAutomation(t, auto, func(a *uprevv1.UpdateAutomation) {
		a.Spec.Git.Commit.MessageTemplate = "chore({{ .Automation }}): {{ subject . }}\n\n{{ range .Updates }}- {{ .Policy.Name }}\n{{ end }}"
	})
	sha := waitForPush(t, auto, "")
	g.Expect(f.commitField(sha, "%B")).To(Equal("chore(" + f.ns + "/fleet): Update agent to 1.1.0\n\n- agent\n\nUprev-Update: " + f.ns + "/agent 1.0.0 --> 1.1.0"))
	st := waitForReady(t, auto)
	g.Expect(st.ObservedGeneration).To(Equal(int64(3)))
	g.Expect(conditions.IsStalled(auto)).To(BeFalse())
}

func TestCraftedCommitIsReportedAsABadCommit(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{"apps/agent.yaml": withVersion(agentMarked, "1.0.0")})
	waitForLatestTag(t, newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0")), "1.0.0")
	auto := newAutomation(t, f.ns, f.url)
	waitForReady(t, auto)

	// Pushed to a server that does not fsck what it receives.
	bad := f.git.CommitTree(t, fleetRepo, "main", false, gitserver.TreeEntry{Name: ".git", Entries: []gitserver.TreeEntry{{Name: "config", Content: "[core]\n\tworktree = /\n"}}})
	runAutomation(t, auto)
	c := conditions.Get(auto, meta.ReadyCondition)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(uprevv1.BadCommitReason))
	g.Expect(c.Message).To(And(ContainSubstring(bad), ContainSubstring(`".git" names the .git directory`)))
	g.Expect(conditions.IsReconciling(auto)).To(BeFalse())
	g.Expect(f.tip("main")).To(Equal(bad), "nothing pushed on top of it")
}
