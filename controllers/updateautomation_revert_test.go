package controllers

import (
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// agentMarked is apps/agent.yaml at a version.
const agentMarked = "image: IMAGE:VERSION # {\"$imagepolicy\": \"NS:agent\"}\n"

// revertedFixture is a repository where uprev wrote agent 1.1.0 and a
// person reverted that commit with `git revert`.
type revertedFixture struct {
	*automationFixture
	pol            *imagev1.ImagePolicy
	auto           *uprevv1.UpdateAutomation
	update, revert string
}

func newRevertedFixture(t *testing.T) *revertedFixture {
	t.Helper()
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{"apps/agent.yaml": withVersion(agentMarked, "1.0.0")})
	r := &revertedFixture{automationFixture: f}
	r.pol = newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, r.pol, "1.1.0")
	r.auto = newAutomation(t, f.ns, f.url)
	r.update = waitForPush(t, r.auto, "")
	g.Expect(f.readFile("main", "apps/agent.yaml")).To(Equal(f.expand(withVersion(agentMarked, "1.1.0"))))

	r.revert = f.git.Revert(t, fleetRepo, "main", r.update)
	g.Expect(f.readFile("main", "apps/agent.yaml")).To(Equal(f.expand(withVersion(agentMarked, "1.0.0"))))
	return r
}

// withVersion puts version in for VERSION.
func withVersion(s, version string) string {
	return strings.ReplaceAll(s, "VERSION", version)
}

// expectHeld checks that a run leaves the revert in force and reports the
// hold.
func (r *revertedFixture) expectHeld(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	st := runAutomation(t, r.auto)
	g.Expect(r.tip("main")).To(Equal(r.revert), "no commit on top of the revert")
	g.Expect(r.readFile("main", "apps/agent.yaml")).To(Equal(r.expand(withVersion(agentMarked, "1.0.0"))))
	g.Expect(st.LastPushCommit).To(Equal(r.update))
	g.Expect(st.Holds).To(Equal([]uprevv1.Hold{{Policy: r.ns + "/agent", Version: "1.1.0", RevertedIn: r.revert}}))
	g.Expect(conditions.IsReady(r.auto)).To(BeTrue())
	// The run after the revert rewrites and finds nothing to write; a later
	// one finds nothing new at all.
	g.Expect(conditions.GetMessage(r.auto, meta.ReadyCondition)).To(Or(
		Equal("no change; 1 held"), Equal("no change: nothing new since main@sha1:"+r.revert+"; 1 held")))
}

func TestRevertedVersionIsHeldUntilANewerOne(t *testing.T) {
	g := NewWithT(t)
	r := newRevertedFixture(t)
	r.expectHeld(t)
	r.expectHeld(t)
	g.Expect(r.log("main")).To(HaveLen(3))

	r.pushTag("1.2.0")
	sha := waitForPush(t, r.auto, r.update)
	g.Expect(r.tip("main")).To(Equal(sha))
	g.Expect(r.readFile("main", "apps/agent.yaml")).To(Equal(r.expand(withVersion(agentMarked, "1.2.0"))))
	g.Expect(r.commitField(sha, "%s|%(trailers:key=Uprev-Update,valueonly)")).To(Equal("Update agent to 1.2.0|" + r.ns + "/agent 1.0.0 --> 1.2.0"))
	g.Eventually(func(g Gomega) {
		getAutomation(g, r.auto)
		g.Expect(r.auto.Status.LastPushCommit).To(Equal(sha))
		g.Expect(r.auto.Status.Holds).To(BeEmpty(), "the hold ends when the policy moves past the held version")
	}).Should(Succeed())
	st := runAutomation(t, r.auto)
	g.Expect(st.Holds).To(BeEmpty())
	g.Expect(r.log("main")).To(HaveLen(4))
}

func TestReleasedHoldWritesTheVersionAgain(t *testing.T) {
	g := NewWithT(t)
	r := newRevertedFixture(t)
	r.expectHeld(t)

	// Releasing another version leaves the hold in force.
	updateAutomation(t, r.auto, func(a *uprevv1.UpdateAutomation) {
		a.Annotations = map[string]string{uprevv1.HoldReleaseAnnotation: r.ns + "/agent 1.0.9, " + r.ns + "/other 1.1.0"}
	})
	r.expectHeld(t)

	updateAutomation(t, r.auto, func(a *uprevv1.UpdateAutomation) {
		a.Annotations[uprevv1.HoldReleaseAnnotation] = r.ns + "/agent 1.0.9, " + r.ns + "/agent 1.1.0"
	})
	sha := waitForPush(t, r.auto, r.update)
	g.Expect(r.tip("main")).To(Equal(sha))
	g.Expect(r.log("main")[1].SHA).To(Equal(r.revert))
	g.Expect(r.readFile("main", "apps/agent.yaml")).To(Equal(r.expand(withVersion(agentMarked, "1.1.0"))))
	g.Eventually(func(g Gomega) {
		g.Expect(getAutomation(g, r.auto).Status.Holds).To(BeEmpty())
		g.Expect(conditions.IsReady(r.auto)).To(BeTrue())
	}).Should(Succeed())
	st := runAutomation(t, r.auto)
	g.Expect(st.LastPushCommit).To(Equal(sha))
	g.Expect(r.log("main")).To(HaveLen(4))
}

func TestRevertOnThePushBranchIsHeld(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{"apps/agent.yaml": withVersion(agentMarked, "1.0.0")})
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.1.0")
	auto := newAutomation(t, f.ns, f.url, withPushBranch("uprev/review"))
	update := waitForPush(t, auto, "")

	// A reviewer reverts the update on the review branch, before it
	// reaches main.
	revert := f.git.Revert(t, fleetRepo, "uprev/review", update)
	for range 2 {
		st := runAutomation(t, auto)
		g.Expect(f.tip("uprev/review")).To(Equal(revert), "the revert is not undone")
		g.Expect(st.Holds).To(Equal([]uprevv1.Hold{{Policy: f.ns + "/agent", Version: "1.1.0", RevertedIn: revert}}))
	}
	g.Expect(f.readFile("uprev/review", "apps/agent.yaml")).To(Equal(f.expand(withVersion(agentMarked, "1.0.0"))))

	f.pushTag("1.2.0")
	sha := waitForPush(t, auto, update)
	g.Expect(f.log("uprev/review")[1].SHA).To(Equal(revert))
	g.Expect(f.readFile("uprev/review", "apps/agent.yaml")).To(Equal(f.expand(withVersion(agentMarked, "1.2.0"))))
	g.Expect(f.commitField(sha, "%s")).To(Equal("Update agent to 1.2.0"))
	g.Expect(waitForReady(t, auto).Holds).To(BeEmpty())
}
