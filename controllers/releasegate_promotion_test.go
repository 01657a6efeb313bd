package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// stagingSync creates the Sync staging of path staging in the repository
// at url, applying to the local cluster as its one target eu-staging and
// checking health for up to 5s.
func stagingSync(t *testing.T, ns, url string) *uprevv1.Sync {
	t.Helper()
	s := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "staging"},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
			Path:     "staging",
			Targets:  []uprevv1.Target{{Name: "eu-staging"}},
			Prune:    true,
			Wait:     true,
			Timeout:  &metav1.Duration{Duration: 5 * time.Second},
		},
	}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatalf("creating Sync: %v", err)
	}
	return s
}

// promotionGate creates the ReleaseGate prod over the policies labelled
// stage=prod, promoting from eu-staging of Sync staging after healthyFor.
func promotionGate(t *testing.T, ns, healthyFor string) *uprevv1.ReleaseGate {
	t.Helper()
	rg := &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: uprevv1.ReleaseGateSpec{
			PolicySelector: metav1.LabelSelector{MatchLabels: map[string]string{"stage": "prod"}},
			Promotion:      &uprevv1.Promotion{Sync: "staging", Targets: []string{"eu-staging"}, HealthyFor: healthyFor},
		},
	}
	if err := k8s.Create(context.Background(), rg); err != nil {
		t.Fatalf("creating ReleaseGate: %v", err)
	}
	seenByTheManager(t, rg)
	return rg
}

// healthyOn makes the Deployments of ns named names available, as their
// controllers would, and waits until eu-staging of s is healthy on the
// revision ending in commit; it returns since when.
func healthyOn(t *testing.T, s *uprevv1.Sync, commit string, names ...string) time.Time {
	t.Helper()
	var since time.Time
	NewWithT(t).Eventually(func(g Gomega) {
		// Marked again on every try: the Sync may apply the revision after
		// a mark, and a new generation needs a new status.
		for _, name := range names {
			g.Expect(cluster.MarkDeploymentAvailable(context.Background(), k8s, s.Namespace, name)).To(Succeed())
		}
		getWithTargets(g, s)
		g.Expect(s.Status.Targets).To(HaveLen(1))
		ts := s.Status.Targets[0]
		g.Expect(ts.LastAppliedRevision).To(HaveSuffix(commit), ts.Message)
		g.Expect(ts.HealthySince).NotTo(BeNil(), ts.Message)
		since = ts.HealthySince.Time
	}).WithTimeout(time.Minute).Should(Succeed())
	return since
}

// markDeploymentUnavailable sets the status a Deployment whose pods
// crash would have.
func markDeploymentUnavailable(ctx context.Context, ns, name string) error {
	var d appsv1.Deployment
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
		return err
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"},
		},
	}
	return k8s.Status().Update(ctx, &d)
}

// advanceTo moves the manager's clock to shortly before at, asks pol to
// select again and checks it still has tag; then the policy must pass at
// by itself, with no request and no scan.
func advanceTo(t *testing.T, at time.Time, pol *imagev1.ImagePolicy, tag string) {
	t.Helper()
	testClock.Advance(at.Sub(testClock.Now()) - 8*time.Second)
	requestReconcile(t, pol)
	token := pol.GetAnnotations()[meta.ReconcileRequestAnnotation]
	NewWithT(t).Eventually(func(g Gomega) {
		_, got := policyState(g, pol)
		g.Expect(pol.Status.LastHandledReconcileAt).To(Equal(token))
		g.Expect(got).To(Equal(tag))
	}).Should(Succeed())
}

func TestPromotionFollowsStagingOnlyAfterHealthyForAndARevertTakesItBack(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.4.2", "1.5.0", "1.5.1")
	image := reg.Image("acme/agent")
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"staging/agent.yaml": deployment(ns, "agent", image+":1.4.2")})
	s := stagingSync(t, ns, url)
	first := srv.Log(t, "fleet", "main")[0].SHA
	since := healthyOn(t, s, first, "agent")

	repo := newRepository(t, ns, image)
	scanned(t, repo, "1.5.1")
	rg := promotionGate(t, ns, "24h")
	pol := newPolicy(t, ns, "agent", semverChoice("1.x"), prodStage)

	// Staging runs 1.4.2, healthy for less than a day: nothing passes yet.
	eligibleAt := since.Add(24 * time.Hour)
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(c.Reason).To(Equal(uprevv1.ReleaseGatedReason))
		g.Expect(c.Message).To(ContainSubstring("1.5.1 waits for promotion: eu-staging runs 1.4.2 (ReleaseGate prod), and 2 more newer version(s) wait"))
		g.Expect(tag).To(BeEmpty())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg)).To(Succeed())
		g.Expect(conditions.IsReady(rg)).To(BeTrue(), conditions.GetMessage(rg, meta.ReadyCondition))
		g.Expect(rg.Status.Policies).To(HaveLen(1))
		w := rg.Status.Policies[0].Waiting
		g.Expect(w).To(HaveLen(3))
		g.Expect(w[0]).To(Equal(uprevv1.WaitingVersion{Tag: "1.5.1", Gate: "promotion", Reason: "eu-staging runs 1.4.2"}))
		g.Expect(w[2].Tag).To(Equal("1.4.2"))
		g.Expect(w[2].EligibleAt.Time).To(BeTemporally("==", eligibleAt))
	}).Should(Succeed())

	// Shortly before a day of health the policy still waits; then it takes
	// 1.4.2 by itself, and an Event says so.
	advanceTo(t, eligibleAt, pol, "")
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.4.2"))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("1.5.1 waits for promotion: eu-staging runs 1.4.2"))
	}).Should(Succeed())
	expectEvent(t, ns, "agent", uprevv1.GateReleasedReason, "1.4.2 no longer waits for promotion at ReleaseGate prod")
	// The gate reports the evidence it let 1.4.2 through on, which pull
	// requests show: where it runs healthy, and since when.
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg)).To(Succeed())
		g.Expect(rg.Status.Policies[0].Latest).To(HaveField("Promoted", ConsistOf(And(
			HaveField("Sync", s.Name), HaveField("Target", "eu-staging"), HaveField("HealthySince.Time", BeTemporally("==", since))))))
	}).Should(Succeed())

	// Staging takes 1.5.0: prod waits for a day of health on it.
	second := srv.CommitFile(t, "fleet", "main", "staging/agent.yaml", deployment(ns, "agent", image+":1.5.0"), "Staging: agent 1.5.0")
	requestReconcile(t, s)
	since = healthyOn(t, s, second, "agent")
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(c.Message).To(ContainSubstring("1.5.1 waits for promotion: eu-staging runs 1.5.0 (ReleaseGate prod)"))
		g.Expect(tag).To(Equal("1.4.2"), "the latestRef stays while staging soaks")
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg)).To(Succeed())
		g.Expect(rg.Status.Policies[0].Waiting).To(ContainElement(And(
			HaveField("Tag", "1.5.0"),
			HaveField("EligibleAt", HaveField("Time", BeTemporally("==", since.Add(24*time.Hour)))),
			HaveField("Reason", fmt.Sprintf("eu-staging healthy on 1.5.0 since %s, for less than 24h0m0s", since.UTC().Format(time.RFC3339)))),
		))
	}).Should(Succeed())

	// A revert in staging takes 1.5.0 back before its day is over: prod
	// never gets it, even once that day has passed.
	srv.Revert(t, "fleet", "main", second)
	reverted := srv.Log(t, "fleet", "main")[0].SHA
	requestReconcile(t, s)
	since = healthyOn(t, s, reverted, "agent")
	testClock.Advance(25 * time.Hour)
	requestReconcile(t, pol)
	token := pol.GetAnnotations()[meta.ReconcileRequestAnnotation]
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(pol.Status.LastHandledReconcileAt).To(Equal(token))
		g.Expect(tag).To(Equal("1.4.2"))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("1.5.1 waits for promotion: eu-staging runs 1.4.2"))
	}).Should(Succeed())
	g.Expect(testClock.Now().After(since.Add(24 * time.Hour))).To(BeTrue())
}

func TestPromotionStopsWhileStagingIsUnhealthyAndFallsBackToAnOlderEligibleVersion(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.4.2", "1.5.0")
	image := reg.Image("acme/agent")
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"staging/agent.yaml": deployment(ns, "agent", image+":1.5.0")})
	s := stagingSync(t, ns, url)
	first := srv.Log(t, "fleet", "main")[0].SHA
	healthyOn(t, s, first, "agent")
	repo := newRepository(t, ns, image)
	scanned(t, repo, "1.5.0")

	// Two gates on prod: promotion after an hour of health, and an age.
	promotionGate(t, ns, "1h")
	ageGate := &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "age"},
		Spec: uprevv1.ReleaseGateSpec{
			PolicySelector: metav1.LabelSelector{MatchLabels: map[string]string{"stage": "prod"}},
			MinReleaseAge:  "72h",
		},
	}
	g.Expect(k8s.Create(context.Background(), ageGate)).To(Succeed())
	pol := newPolicy(t, ns, "agent", semverChoice("1.x"), prodStage)
	testClock.Advance(73 * time.Hour)
	requestReconcile(t, pol)
	g.Eventually(func(g Gomega) {
		_, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.5.0"))
	}).Should(Succeed())

	// Staging adds a canary on 1.5.1, a day younger than the age asks:
	// 1.5.1 is promoted but young, so prod falls back to 1.5.0, which
	// staging still runs.
	reg.PushTags(t, "acme/agent", "1.5.1")
	requestReconcile(t, repo)
	scanned(t, repo, "1.5.1")
	second := srv.CommitFile(t, "fleet", "main", "staging/canary.yaml", deployment(ns, "canary", image+":1.5.1"), "Staging: canary 1.5.1")
	requestReconcile(t, s)
	healthyOn(t, s, second, "agent", "canary")
	testClock.Advance(2 * time.Hour)
	requestReconcile(t, pol)
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.5.0"))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("1.5.1 waits for minReleaseAge until"))
		g.Expect(c.Message).To(ContainSubstring("(ReleaseGate age)"))
	}).Should(Succeed())

	// The canary turns unhealthy: once its age has passed, 1.5.1 still
	// does not pass, and prod keeps 1.5.0.
	g.Eventually(func() error { return markDeploymentUnavailable(context.Background(), ns, "canary") }).Should(Succeed())
	requestReconcile(t, s)
	g.Eventually(func(g Gomega) {
		getWithTargets(g, s)
		g.Expect(s.Status.Targets).To(HaveLen(1))
		g.Expect(s.Status.Targets[0].Healthy).To(BeFalse())
		g.Expect(s.Status.Targets[0].HealthySince).To(BeNil())
	}).WithTimeout(time.Minute).Should(Succeed())
	testClock.Advance(73 * time.Hour)
	requestReconcile(t, pol)
	token := pol.GetAnnotations()[meta.ReconcileRequestAnnotation]
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(pol.Status.LastHandledReconcileAt).To(Equal(token))
		g.Expect(tag).To(Equal("1.5.0"), "the latestRef stays")
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("stays 1.5.0: no version passes the release gates now; 1.5.1 waits for promotion: eu-staging runs 1.5.1 but is not healthy (ReleaseGate prod)"))
	}).Should(Succeed())

	// Healthy again, the hour counts anew.
	since := healthyOn(t, s, second, "canary")
	requestReconcile(t, pol)
	g.Eventually(func(g Gomega) {
		_, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.5.0"))
	}).Should(Succeed())
	advanceTo(t, since.Add(time.Hour), pol, "1.5.0")
	g.Eventually(func(g Gomega) {
		_, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.5.1"))
	}).Should(Succeed())
}

func TestPromotionBadInputIsAClearConditionAndHoldsThePolicy(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/api", "1.0.0")
	newRepository(t, ns, reg.Image("acme/api"))
	pol := newPolicy(t, ns, "api", semverChoice("1.x"), prodStage)
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal("1.0.0"))
	}).Should(Succeed())

	expect := func(reason, message string, stalled bool) {
		t.Helper()
		rg := &uprevv1.ReleaseGate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"}}
		g.Eventually(func(g Gomega) {
			c := readyCondition(g, rg)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(reason))
			g.Expect(c.Message).To(ContainSubstring(message))
			g.Expect(conditions.IsStalled(rg)).To(Equal(stalled))
		}).Should(Succeed())
		g.Eventually(func(g Gomega) {
			c, tag := policyState(g, pol)
			g.Expect(c.Reason).To(Equal(uprevv1.GateInvalidReason))
			g.Expect(c.Message).To(ContainSubstring("ReleaseGate prod: " + message))
			g.Expect(tag).To(Equal("1.0.0"), "the last latestRef is kept")
		}).Should(Succeed())
	}
	update := func(mutate func(*uprevv1.ReleaseGate)) {
		t.Helper()
		rg := &uprevv1.ReleaseGate{}
		g.Eventually(func() error {
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "prod"}, rg); err != nil {
				return err
			}
			mutate(rg)
			return k8s.Update(context.Background(), rg)
		}).Should(Succeed())
	}

	// A Sync that does not exist; creating it is seen without a change to
	// the gate.
	promotionGate(t, ns, "1h")
	expect(uprevv1.PromotionSyncNotFoundReason, "spec.promotion.sync: Sync "+ns+"/staging not found", false)
	staging := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "staging"},
		Spec: uprevv1.SyncSpec{Interval: metav1.Duration{Duration: time.Hour}, Suspend: true,
			Git: uprevv1.GitSource{URL: "https://git.example.com/fleet.git", Ref: uprevv1.GitRef{Branch: "main"}}, Targets: []uprevv1.Target{{Name: "us-staging"}}},
	}
	g.Expect(k8s.Create(context.Background(), staging)).To(Succeed())
	// A Sync that never checks health: no version could ever pass.
	expect(uprevv1.PromotionNeverHealthyReason, "spec.promotion.sync: Sync staging does not check health (spec.wait is false)", false)
	g.Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(staging), staging); err != nil {
			return err
		}
		staging.Spec.Wait = true
		return k8s.Update(context.Background(), staging)
	}).Should(Succeed())
	// A target it does not have.
	expect(uprevv1.PromotionTargetNotFoundReason, `spec.promotion.targets: Sync staging has no target "eu-staging"`, false)
	// A duration that does not fit in one.
	update(func(rg *uprevv1.ReleaseGate) {
		rg.Spec.Promotion.Targets = nil
		rg.Spec.Promotion.HealthyFor = "100000000000h"
	})
	expect(uprevv1.InvalidDurationReason, `spec.promotion.healthyFor "100000000000h" is not a duration`, true)
	// Fixed: us-staging has applied nothing yet, so the policy waits.
	update(func(rg *uprevv1.ReleaseGate) { rg.Spec.Promotion.HealthyFor = "1h" })
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("stays 1.0.0: no version passes the release gates now; 1.0.0 waits for promotion: us-staging of Sync staging has applied nothing healthy yet"))
		g.Expect(tag).To(Equal("1.0.0"))
	}).Should(Succeed())

	// Another namespace's Sync cannot be named: spec.promotion.sync is a
	// name, looked up in the gate's own namespace only.
	err := k8s.Create(context.Background(), &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "elsewhere"},
		Spec:       uprevv1.ReleaseGateSpec{Promotion: &uprevv1.Promotion{Sync: "other/staging"}},
	})
	g.Expect(err).To(MatchError(ContainSubstring("spec.promotion.sync")))
}
