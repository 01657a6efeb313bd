package controllers

import (
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/update"
)

// TestUnchanged is every input of a run that, when it differs from what the
// last successful run saw, makes a full run.
func TestUnchanged(t *testing.T) {
	key := update.PolicyKey{Namespace: "fleet", Name: "agent"}
	crdsKey := update.PolicyKey{Namespace: "fleet", Name: "operator"}
	tips := revisions{source: "main@sha1:aaa", push: "uprev/updates@sha1:bbb"}
	policy := func(tag, digest string) map[update.PolicyKey]*imagev1.ImagePolicy {
		return map[update.PolicyKey]*imagev1.ImagePolicy{key: {Status: imagev1.ImagePolicyStatus{
			LatestRef: &imagev1.ImageRef{Name: "acme/agent", Tag: tag, Digest: digest},
		}}}
	}
	rules := func(releases string) *guard.Rules {
		return guard.New(guard.Input{
			Policies: map[update.PolicyKey]guard.Policy{key: {Ref: update.Ref{Image: "acme/agent", Tag: "1.3.0"}}},
			Holds:    []guard.Hold{{Policy: key.String(), Version: "1.3.0", RevertedIn: "ccc"}},
			Releases: guard.ParseReleases(releases),
		})
	}
	bundle := func(digest string) []*crdBundle {
		return []*crdBundle{{policy: crdsKey, spec: uprevv1.CRDBundle{Path: "crds/operator"}, digest: digest}}
	}
	last := func() *uprevv1.UpdateAutomation {
		auto := &uprevv1.UpdateAutomation{
			ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Status: uprevv1.UpdateAutomationStatus{
				ObservedGeneration:     3,
				ObservedSourceRevision: tips.source,
				ObservedPushRevision:   tips.push,
				ObservedPolicies:       map[string]uprevv1.ImageRef{"agent": {Name: "acme/agent", Tag: "1.3.0", Digest: "sha256:13"}},
				Holds:                  holdStatus(rules("").Held()),
				CRDs:                   []uprevv1.CRDBundleStatus{{Policy: crdsKey.String(), Path: "crds/operator", Digest: "sha256:c1"}},
			},
		}
		conditions.MarkTrue(auto, meta.ReadyCondition, meta.SucceededReason, "no change")
		return auto
	}
	same := func() *automationRun {
		return &automationRun{policies: policy("1.3.0", "sha256:13"), rules: rules(""), crds: bundle("sha256:c1")}
	}
	g := NewWithT(t)
	g.Expect(holdStatus(rules("").Held())).To(HaveLen(1), "the fixture has a hold in force")
	g.Expect(unchanged(last(), same(), tips)).To(BeTrue(), "nothing new")

	for _, tc := range []struct {
		name   string
		change func(auto *uprevv1.UpdateAutomation, run *automationRun, tips *revisions)
	}{
		{"someone pushed to the branch", func(_ *uprevv1.UpdateAutomation, _ *automationRun, tips *revisions) { tips.source = "main@sha1:ddd" }},
		{"someone pushed to the push branch", func(_ *uprevv1.UpdateAutomation, _ *automationRun, tips *revisions) {
			tips.push = "uprev/updates@sha1:eee"
		}},
		{"the push branch was deleted", func(_ *uprevv1.UpdateAutomation, _ *automationRun, tips *revisions) { tips.push = "" }},
		{"no revision recorded yet", func(auto *uprevv1.UpdateAutomation, _ *automationRun, tips *revisions) {
			auto.Status.ObservedSourceRevision, tips.source = "", ""
		}},
		{"the policy selects a new tag", func(_ *uprevv1.UpdateAutomation, run *automationRun, _ *revisions) {
			run.policies = policy("1.4.0", "sha256:14")
		}},
		{"the tag moved to a new digest", func(_ *uprevv1.UpdateAutomation, run *automationRun, _ *revisions) {
			run.policies = policy("1.3.0", "sha256:99")
		}},
		{"a policy is no longer selected", func(_ *uprevv1.UpdateAutomation, run *automationRun, _ *revisions) { run.policies = nil }},
		{"a hold was released", func(_ *uprevv1.UpdateAutomation, run *automationRun, _ *revisions) {
			run.rules = rules(key.String() + " 1.3.0")
		}},
		{"a CRD artifact changed", func(_ *uprevv1.UpdateAutomation, run *automationRun, _ *revisions) { run.crds = bundle("sha256:c2") }},
		{"a CRD bundle was added", func(_ *uprevv1.UpdateAutomation, run *automationRun, _ *revisions) {
			run.crds = append(bundle("sha256:c1"), bundle("sha256:c9")...)
		}},
		{"the spec changed", func(auto *uprevv1.UpdateAutomation, _ *automationRun, _ *revisions) { auto.Generation = 4 }},
		{"the last run failed", func(auto *uprevv1.UpdateAutomation, _ *automationRun, _ *revisions) {
			conditions.MarkFalse(auto, meta.ReadyCondition, uprevv1.GitOperationFailedReason, "push rejected")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auto, run, now := last(), same(), tips
			tc.change(auto, run, &now)
			NewWithT(t).Expect(unchanged(auto, run, now)).To(BeFalse())
		})
	}
}

func TestAutomationWithNothingNewDoesNoRewrite(t *testing.T) {
	g := NewWithT(t)
	f, auto := settledAgentAutomation(t)

	f.pushTag("1.1.0")
	sha := waitForPush(t, auto, "")
	g.Eventually(func(g Gomega) {
		g.Expect(getAutomation(g, auto).Status.ObservedSourceRevision).To(Equal("main@sha1:"+sha), "the pushed commit is what the run saw")
	}).Should(Succeed())

	st := runAutomation(t, auto)
	g.Expect(st.LastPushCommit).To(Equal(sha))
	g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(Equal("no change: nothing new since main@sha1:" + sha))
	g.Expect(f.log("main")).To(HaveLen(2))

	// Someone sets the value back by hand: the branch moved, so the next run
	// rewrites it again.
	person := newPusher(t, f.url)
	lowered := strings.Replace(f.readFile("main", "clusters/prod/agent.yaml"), ":1.1.0 #", ":1.0.0 #", 1)
	person.pushFiles(map[string]string{"clusters/prod/agent.yaml": lowered}, "Pin the agent by hand")
	st = runAutomation(t, auto)
	g.Expect(st.LastPushCommit).NotTo(Equal(sha))
	g.Expect(f.readFile("main", "clusters/prod/agent.yaml")).To(ContainSubstring(":1.1.0 #"))
	g.Expect(st.ObservedSourceRevision).To(Equal("main@sha1:" + st.LastPushCommit))
}

func TestAutomationRecordsThePushBranchRevision(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{"clusters/prod/agent.yaml": agentDeployment})
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.1.0")
	mainTip := f.tip("main")
	auto := newAutomation(t, f.ns, f.url, withPushBranch("uprev/updates"))
	sha := waitForPush(t, auto, "")
	g.Eventually(func(g Gomega) {
		st := getAutomation(g, auto).Status
		g.Expect(st.ObservedSourceRevision).To(Equal("main@sha1:" + mainTip))
		g.Expect(st.ObservedPushRevision).To(Equal("uprev/updates@sha1:" + sha))
	}).Should(Succeed())
	runAutomation(t, auto)
	g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(HavePrefix("no change: nothing new since"))

	// A reviewer's commit on the push branch is new: the run is a full one.
	reviewer := newPusher(t, f.url)
	reviewer.git("fetch", "--quiet", "origin", "uprev/updates")
	reviewer.git("checkout", "--quiet", "-b", "uprev/updates", "FETCH_HEAD")
	reviewer.git("commit", "--quiet", "--allow-empty", "-m", "Reviewed")
	reviewer.git("push", "--quiet", "origin", "uprev/updates")
	st := runAutomation(t, auto)
	g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(Equal("no change"))
	g.Expect(st.ObservedPushRevision).To(Equal("uprev/updates@sha1:" + f.tip("uprev/updates")))
}

func TestAutomationShowsReconcilingDuringAPush(t *testing.T) {
	g := NewWithT(t)
	gate := make(chan struct{})
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{"clusters/prod/agent.yaml": agentDeployment}, gitserver.WithPushGate(gate))
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.0.0")
	auto := newAutomation(t, f.ns, f.url)
	waitForReady(t, auto)

	f.pushTag("1.1.0")
	g.Eventually(func(g Gomega) {
		c := conditions.Get(getAutomation(g, auto), meta.ReconcilingCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(Equal("writing back to main"))
	}).Should(Succeed(), "a person watching sees the write-back under way while the remote holds the push")
	close(gate)
	sha := waitForPush(t, auto, "")
	g.Eventually(func(g Gomega) {
		getAutomation(g, auto)
		g.Expect(conditions.Get(auto, meta.ReconcilingCondition)).To(BeNil())
		g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(HavePrefix("pushed " + sha[:10]))
	}).Should(Succeed())
}

// settledAgentAutomation starts an automation of agent, whose only tag
// 1.0.0 Git already holds, and waits until it is Ready with nothing to do.
func settledAgentAutomation(t *testing.T) (*automationFixture, *uprevv1.UpdateAutomation) {
	t.Helper()
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{"clusters/prod/agent.yaml": agentDeployment})
	waitForLatestTag(t, newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0")), "1.0.0")
	auto := newAutomation(t, f.ns, f.url)
	waitForReady(t, auto)
	return f, auto
}
