package e2e

import (
	"context"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// healthyOn waits until target of the Sync s is healthy on the revision of
// main at commit, marking the Deployment ns/name available meanwhile as its
// controller would (no kubelet runs here), and returns since when.
func healthyOn(t testing.TB, s *uprevv1.Sync, target, ns, name, commit string) time.Time {
	t.Helper()
	var since time.Time
	NewWithT(t).Eventually(func(g Gomega) {
		// Marked on every try: the Sync may apply the revision after a
		// mark, and a new generation needs a new status.
		g.Expect(cluster.MarkDeploymentAvailable(context.Background(), k8s, ns, name)).To(Succeed())
		get(g, s)
		ts := targetStatus(g, s, target)
		g.Expect(ts.LastAppliedRevision).To(Equal("main@sha1:"+commit), ts.Message)
		g.Expect(ts.HealthySince).NotTo(BeNil(), ts.Message)
		since = ts.HealthySince.Time
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	return since
}

// TestStagedPromotionFollowsStagingOnceHealthy runs
// examples/staged-promotion: one automation writes a new release to
// staging at once, and to prod only after staging has run it healthy for
// healthyFor.
func TestStagedPromotionFollowsStagingOnceHealthy(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const example = "staged-promotion"
	s := newScenario(t, example)
	s.rename(example, s.ns)
	stagingNS, prodNS := s.ns+"-staging", s.ns+"-prod"
	s.rename("apps-staging", stagingNS)
	s.rename("apps-prod", prodNS)
	image := s.reg.Image("acme/agent")
	s.reg.PushTags(t, "acme/agent", "1.4.1")
	s.initRepo(s.exampleFleet(example))
	objs := s.exampleObjects(example)
	repo := object[*imagev1.ImageRepository](t, objs, "agent")
	staging := object[*imagev1.ImagePolicy](t, objs, "agent-staging")
	prod := object[*imagev1.ImagePolicy](t, objs, "agent-prod")
	gate := object[*uprevv1.ReleaseGate](t, objs, "prod")
	auto := object[*uprevv1.UpdateAutomation](t, objs, "agent")
	stagingSync := object[*uprevv1.Sync](t, objs, "staging")
	prodSync := object[*uprevv1.Sync](t, objs, "prod")
	// The suite does not wait a day.
	const healthyFor = 20 * time.Second
	gate.Spec.Promotion.HealthyFor = healthyFor.String()

	// Both stages run 1.4.1, healthy.
	create(t, stagingSync, prodSync)
	initial := s.tip("main")
	healthyOn(t, stagingSync, "eu-staging", stagingNS, "agent", initial)
	healthyOn(t, prodSync, "eu-prod", prodNS, "agent", initial)
	create(t, gate, repo, staging, prod)
	waitForTag(t, prod, "1.4.1")
	create(t, auto)

	// 1.4.2 is released: staging takes it at once, prod waits.
	s.reg.PushTags(t, "acme/agent", "1.4.2")
	requestReconcile(t, repo)
	waitForTag(t, staging, "1.4.2")
	first := waitForPush(t, auto, "")
	g.Expect(s.changedFiles(first)).To(Equal([]string{"clusters/staging/agent.yaml"}))
	since := healthyOn(t, stagingSync, "eu-staging", stagingNS, "agent", first)
	g.Eventually(func(g Gomega) {
		get(g, gate)
		g.Expect(gate.Status.Policies).To(ConsistOf(HaveField("Name", "agent-prod")))
		gp := gate.Status.Policies[0]
		if gp.Latest != nil && gp.Latest.Tag == "1.4.2" {
			return // released already: the wait is checked below
		}
		g.Expect(gp.Waiting).To(ConsistOf(And(HaveField("Tag", "1.4.2"), HaveField("Gate", "promotion"),
			HaveField("EligibleAt.Time", BeTemporally("==", since.Add(healthyFor))))))
	}).Should(Succeed())

	// Once staging has been healthy on 1.4.2 for healthyFor, prod follows,
	// with no scan and no request.
	second := waitForPush(t, auto, first)
	g.Expect(time.Now()).To(BeTemporally(">=", since.Add(healthyFor)))
	g.Expect(s.changedFiles(second)).To(Equal([]string{"clusters/prod/agent.yaml"}))
	g.Expect(s.readFile("main", "clusters/prod/agent.yaml")).To(ContainSubstring(image + ":1.4.2 #"))
	healthyOn(t, prodSync, "eu-prod", prodNS, "agent", second)
	waitForImage(t, prodNS, "agent", image+":1.4.2", k8s)
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(g, s.ns, "agent-prod")).To(ContainElement(ContainSubstring(
			uprevv1.GateReleasedReason + ": 1.4.2 no longer waits for promotion at ReleaseGate prod and is selected")))
	}).Should(Succeed())
}
