package controllers

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	uprevregistry "github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// testClock is the manager's clock: the wall clock, moved forward by what
// tests advance it, so that release ages pass without waiting for them.
var testClock = &shiftedClock{}

// shiftedClock is the wall clock plus an offset that only grows.
type shiftedClock struct{ offset atomic.Int64 }

// Now returns the shifted time.
func (c *shiftedClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Since returns the shifted time since t.
func (c *shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Advance moves the clock forward by d.
func (c *shiftedClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// newGate creates a ReleaseGate selecting the policies labelled stage=prod.
func newGate(t *testing.T, ns, minReleaseAge string) *uprevv1.ReleaseGate {
	t.Helper()
	rg := &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: uprevv1.ReleaseGateSpec{
			PolicySelector: metav1.LabelSelector{MatchLabels: map[string]string{"stage": "prod"}},
			MinReleaseAge:  minReleaseAge,
		},
	}
	if err := k8s.Create(context.Background(), rg); err != nil {
		t.Fatalf("creating ReleaseGate: %v", err)
	}
	seenByTheManager(t, rg)
	return rg
}

// seenByTheManager waits until the manager has reconciled rg, and so has
// it in the cache its ImagePolicy controller lists gates from: a policy
// created before would select without the gate, and keep what it selected
// while the gate holds every version back.
func seenByTheManager(t *testing.T, rg *uprevv1.ReleaseGate) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		got := &uprevv1.ReleaseGate{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).Should(Succeed())
}

// prodStage labels a policy stage=prod.
func prodStage(p *imagev1.ImagePolicy) { p.Labels = map[string]string{"stage": "prod"} }

// scanned waits until the repository's last scan stored tag.
func scanned(t *testing.T, repo *imagev1.ImageRepository, tag string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		tags, err := uprevregistry.Store{Dir: filepath.Join(storagePath, "tags")}.Tags(repoKey(repo))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).To(ContainElement(tag))
	}).Should(Succeed())
}

// firstSeen returns when the manager's scans first saw tag in repo.
func firstSeen(g Gomega, repo *imagev1.ImageRepository, tag string) time.Time {
	tags, err := uprevregistry.Store{Dir: filepath.Join(storagePath, "tags")}.SeenTags(repoKey(repo))
	g.Expect(err).NotTo(HaveOccurred())
	for _, t := range tags {
		if t.Name == tag {
			return t.FirstSeen
		}
	}
	g.Expect(tags).To(ContainElement(HaveField("Name", tag)))
	return time.Time{}
}

// policyState returns the policy's Ready condition and latest tag.
func policyState(g Gomega, pol *imagev1.ImagePolicy) (*metav1.Condition, string) {
	c := readyCondition(g, pol)
	if pol.Status.LatestRef == nil {
		return c, ""
	}
	return c, pol.Status.LatestRef.Tag
}

func TestReleaseAgeHoldsANewTagUntilItIsOldEnough(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0")
	repo := newRepository(t, ns, reg.Image("acme/agent"))
	scanned(t, repo, "1.0.0")
	testClock.Advance(100 * time.Hour)

	rg := newGate(t, ns, "72h")
	pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"), prodStage)
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal("1.0.0"))
	}).Should(Succeed())

	reg.PushTags(t, "acme/agent", "1.1.0")
	requestReconcile(t, repo)
	scanned(t, repo, "1.1.0")
	eligibleAt := firstSeen(g, repo, "1.1.0").Add(72 * time.Hour)
	waits := fmt.Sprintf("1.1.0 waits for minReleaseAge until %s (ReleaseGate prod)", eligibleAt.UTC().Format(time.RFC3339))
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring(waits))
		g.Expect(tag).To(Equal("1.0.0"), "1.1.0 is younger than 72h")
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg)).To(Succeed())
		g.Expect(conditions.IsReady(rg)).To(BeTrue())
		g.Expect(rg.Status.ObservedGeneration).To(Equal(rg.Generation))
		g.Expect(rg.Status.Policies).To(HaveLen(1))
		gp := rg.Status.Policies[0]
		g.Expect(gp.Name).To(Equal("agent"))
		g.Expect(gp.Latest).To(Equal(&uprevv1.GatedVersion{Tag: "1.0.0"}))
		g.Expect(gp.Waiting).To(HaveLen(1))
		g.Expect(gp.Waiting[0].Tag).To(Equal("1.1.0"))
		g.Expect(gp.Waiting[0].Gate).To(Equal("minReleaseAge"))
		g.Expect(gp.Waiting[0].EligibleAt.Time).To(BeTemporally("==", eligibleAt))
	}).Should(Succeed())

	// Shortly before 1.1.0 is old enough, the policy still waits; then it
	// takes 1.1.0 by itself, with no scan and no request.
	testClock.Advance(eligibleAt.Sub(testClock.Now()) - 8*time.Second)
	requestReconcile(t, pol)
	token := pol.GetAnnotations()[meta.ReconcileRequestAnnotation]
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(pol.Status.LastHandledReconcileAt).To(Equal(token))
		g.Expect(tag).To(Equal("1.0.0"))
		g.Expect(c.Message).To(ContainSubstring(waits))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		_, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.1.0"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg)).To(Succeed())
		g.Expect(rg.Status.Policies).To(ConsistOf(uprevv1.GatedPolicy{Name: "agent", Latest: &uprevv1.GatedVersion{Tag: "1.1.0"}}))
	}).Should(Succeed())
}

func TestReleaseGateOnAFreshInstallFallsBackToOlderEligibleVersions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/web", "1.0.0", "1.1.0")
	rg := newGate(t, ns, "72h")
	repo := newRepository(t, ns, reg.Image("acme/web"))
	pol := newPolicy(t, ns, "web", semverChoice("1.x"), prodStage)

	// Every tag is new to a fresh install: nothing passes yet.
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.ReleaseGatedReason))
		g.Expect(c.Message).To(ContainSubstring("no version passes the release gates yet: 1.1.0 waits for minReleaseAge until"))
		g.Expect(tag).To(BeEmpty())
	}).Should(Succeed())

	testClock.Advance(73 * time.Hour)
	reg.PushTags(t, "acme/web", "1.2.0")
	requestReconcile(t, repo)
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.1.0"), "1.2.0 is held back, the next newest is old enough")
		g.Expect(c.Message).To(ContainSubstring("1.2.0 waits for minReleaseAge"))
	}).Should(Succeed())

	// A change of the gate re-evaluates its policies, with no scan.
	testClock.Advance(2 * time.Minute)
	g.Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg); err != nil {
			return err
		}
		rg.Spec.MinReleaseAge = "1m"
		return k8s.Update(context.Background(), rg)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		_, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.2.0"))
	}).Should(Succeed())

	// A policy the gate does not select is not gated, until it is
	// labelled so.
	other := newPolicy(t, ns, "web-dev", semverChoice("1.x"))
	reg.PushTags(t, "acme/web", "1.3.0")
	requestReconcile(t, repo)
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(other)).Tag).To(Equal("1.3.0"))
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.2.0"))
		g.Expect(c.Message).To(ContainSubstring("1.3.0 waits for minReleaseAge"))
	}).Should(Succeed())
	g.Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(other), other); err != nil {
			return err
		}
		prodStage(other)
		return k8s.Update(context.Background(), other)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, other)
		g.Expect(tag).To(Equal("1.2.0"), "labelled into the gate, 1.3.0 is too young")
		g.Expect(c.Message).To(ContainSubstring("1.3.0 waits for minReleaseAge"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg)).To(Succeed())
		g.Expect(rg.Status.Policies).To(HaveLen(2))
		g.Expect(rg.Status.Policies[1].Name).To(Equal("web-dev"))
		g.Expect(rg.Status.Policies[1].Waiting).To(ConsistOf(HaveField("Tag", "1.3.0")))
	}).Should(Succeed())
}

func TestInvalidReleaseGateStallsAndHoldsItsPolicies(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/api", "1.0.0")
	newRepository(t, ns, reg.Image("acme/api"))
	pol := newPolicy(t, ns, "api", semverChoice("1.x"), prodStage)
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal("1.0.0"))
	}).Should(Succeed())

	// The apiserver refuses what is not written as a duration at all.
	bad := &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "words"},
		Spec:       uprevv1.ReleaseGateSpec{MinReleaseAge: "3 days"},
	}
	g.Expect(k8s.Create(context.Background(), bad)).To(MatchError(ContainSubstring("spec.minReleaseAge")))

	// One that looks like a duration but does not fit in one is Stalled,
	// and the policies it selects keep their latestRef.
	rg := newGate(t, ns, "100000000000h")
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, rg)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.InvalidDurationReason))
		g.Expect(c.Message).To(ContainSubstring(`spec.minReleaseAge "100000000000h" is not a duration`))
		g.Expect(conditions.IsStalled(rg)).To(BeTrue())
		g.Expect(rg.Status.ObservedGeneration).To(Equal(rg.Generation))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.GateInvalidReason))
		g.Expect(c.Message).To(ContainSubstring("ReleaseGate prod: spec.minReleaseAge"))
		g.Expect(tag).To(Equal("1.0.0"), "the last latestRef is kept")
	}).Should(Succeed())

	// A selector that does not parse.
	g.Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg); err != nil {
			return err
		}
		rg.Spec.MinReleaseAge = "1h"
		rg.Spec.PolicySelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "stage", Operator: "Sometimes"}}}
		return k8s.Update(context.Background(), rg)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, rg)
		g.Expect(c.Reason).To(Equal(uprevv1.InvalidSelectorReason))
		g.Expect(c.Message).To(ContainSubstring("spec.policySelector"))
		g.Expect(conditions.IsStalled(rg)).To(BeTrue())
	}).Should(Succeed())
}

// gateReleases returns the notes of the GateReleased events the manager
// sent about pol, in order.
func gateReleases(pol *imagev1.ImagePolicy) []string {
	var notes []string
	for _, e := range notificationController.about("ImagePolicy", pol) {
		if e.Reason == uprevv1.GateReleasedReason {
			notes = append(notes, e.Message)
		}
	}
	return notes
}

func TestReleaseAgeCountsAMovedTagAnew(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/mover", "1.0.0")
	repo := newRepository(t, ns, reg.Image("acme/mover"))
	scanned(t, repo, "1.0.0")
	testClock.Advance(100 * time.Hour)
	newGate(t, ns, "72h")
	pol := newPolicy(t, ns, "mover", semverChoice(">=1.0.0"), prodStage, func(p *imagev1.ImagePolicy) {
		p.Spec.DigestReflectionPolicy = imagev1.ReflectIfNotPresent
	})
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal("1.0.0"))
	}).Should(Succeed())

	// 1.1.0 is taken once it is old enough.
	first := reg.PushImage(t, "acme/mover", "1.1.0")
	requestReconcile(t, repo)
	waitingAtGate := func(g Gomega) []uprevv1.WaitingVersion {
		rg := &uprevv1.ReleaseGate{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "prod"}, rg)).To(Succeed())
		g.Expect(rg.Status.Policies).To(HaveLen(1))
		return rg.Status.Policies[0].Waiting
	}
	g.Eventually(waitingAtGate).Should(ConsistOf(HaveField("Tag", "1.1.0")))
	testClock.Advance(73 * time.Hour)
	requestReconcile(t, pol)
	g.Eventually(func(g Gomega) {
		ref := latestRef(g, client.ObjectKeyFromObject(pol))
		g.Expect(ref.Tag).To(Equal("1.1.0"))
		g.Expect(ref.Digest).To(Equal(first))
	}).Should(Succeed())
	g.Eventually(func() []string { return gateReleases(pol) }).Should(ConsistOf(
		"1.1.0 no longer waits for minReleaseAge at ReleaseGate prod and is selected at " + first))

	// Then 1.1.0 is pushed again, as another image. The next scan finds
	// the same tags; the policy finds the tag moved and takes the older
	// eligible version until the new image is old enough in turn.
	testClock.Advance(time.Hour)
	moved := reg.PushImage(t, "acme/mover", "1.1.0")
	movedAt := testClock.Now().Truncate(time.Second)
	requestReconcile(t, repo)
	var eligibleAt time.Time
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.0.0"), "1.1.0 moved to a new digest and waits again")
		g.Expect(c.Message).To(ContainSubstring("1.1.0 waits for minReleaseAge until"))
		seen := firstSeen(g, repo, "1.1.0")
		g.Expect(seen).To(BeTemporally(">=", movedAt))
		eligibleAt = seen.Add(72 * time.Hour)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		rg := &uprevv1.ReleaseGate{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "prod"}, rg)).To(Succeed())
		g.Expect(rg.Status.Policies).To(HaveLen(1))
		g.Expect(rg.Status.Policies[0].Latest).To(Equal(&uprevv1.GatedVersion{Tag: "1.0.0", Digest: latestRef(g, client.ObjectKeyFromObject(pol)).Digest}))
		g.Expect(rg.Status.Policies[0].Waiting).To(ConsistOf(HaveField("Tag", "1.1.0")))
		g.Expect(rg.Status.Policies[0].Waiting[0].EligibleAt.Time).To(BeTemporally("==", eligibleAt))
	}).Should(Succeed())

	// A new Store on the same directory, as after a restart, reads the
	// times and digests back.
	restarted := uprevregistry.Store{Dir: filepath.Join(storagePath, "tags")}
	tags, err := restarted.SeenTags(repoKey(repo))
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]uprevregistry.SeenTag{}
	for _, t := range tags {
		byName[t.Name] = t
	}
	g.Expect(byName["1.1.0"].FirstSeen).To(BeTemporally("==", eligibleAt.Add(-72*time.Hour)))
	g.Expect(byName["1.1.0"]).To(HaveField("Digest", moved))
	g.Expect(byName["1.0.0"]).To(HaveField("Digest", HavePrefix("sha256:")), "the digest the policy took 1.0.0 at")

	// Cost: an evaluation with no scan since the last look-up looks
	// nothing up; a scan that finds the same tags costs one look-up.
	lookups := func() int { c := reg.Counts(); return c.ManifestHead + c.ManifestGet }
	reg.ResetCounts()
	requestReconcile(t, pol)
	token := pol.GetAnnotations()[meta.ReconcileRequestAnnotation]
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(pol), pol)).To(Succeed())
		g.Expect(pol.Status.LastHandledReconcileAt).To(Equal(token))
	}).Should(Succeed())
	g.Expect(lookups()).To(BeZero())
	// (Scan times are kept to the second: the next scan is a minute later.)
	testClock.Advance(time.Minute)
	requestReconcile(t, repo)
	g.Eventually(lookups).Should(Equal(1))

	// Shortly before the new image is old enough, it still waits, and no
	// release was announced for it.
	testClock.Advance(eligibleAt.Sub(testClock.Now()) - 8*time.Second)
	requestReconcile(t, pol)
	token = pol.GetAnnotations()[meta.ReconcileRequestAnnotation]
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(pol.Status.LastHandledReconcileAt).To(Equal(token))
		g.Expect(tag).To(Equal("1.0.0"))
		g.Expect(c.Message).To(ContainSubstring("1.1.0 waits for minReleaseAge"))
	}).Should(Succeed())
	g.Expect(gateReleases(pol)).To(HaveLen(1), "a moved tag that has not waited again is not released")

	// Then the policy takes it, at its new digest, by itself.
	g.Eventually(func(g Gomega) {
		ref := latestRef(g, client.ObjectKeyFromObject(pol))
		g.Expect(ref.Tag).To(Equal("1.1.0"))
		g.Expect(ref.Digest).To(Equal(moved))
	}).Should(Succeed())
	g.Eventually(func() []string { return gateReleases(pol) }).Should(HaveExactElements(
		HaveSuffix(" at "+first), "1.1.0 no longer waits for minReleaseAge at ReleaseGate prod and is selected at "+moved))
}

func TestReleaseAgeCountsATagMovedWhileItWaitsAnew(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/early", "1.0.0")
	repo := newRepository(t, ns, reg.Image("acme/early"))
	scanned(t, repo, "1.0.0")
	testClock.Advance(100 * time.Hour)
	newGate(t, ns, "72h")
	pol := newPolicy(t, ns, "early", semverChoice(">=1.0.0"), prodStage, func(p *imagev1.ImagePolicy) {
		p.Spec.DigestReflectionPolicy = imagev1.ReflectIfNotPresent
	})
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal("1.0.0"))
	}).Should(Succeed())

	// 1.1.0 waits, and its digest is recorded while it does.
	first := reg.PushImage(t, "acme/early", "1.1.0")
	requestReconcile(t, repo)
	stored := func(g Gomega) uprevregistry.SeenTag {
		tags, err := uprevregistry.Store{Dir: filepath.Join(storagePath, "tags")}.SeenTags(repoKey(repo))
		g.Expect(err).NotTo(HaveOccurred())
		i := slices.IndexFunc(tags, func(t uprevregistry.SeenTag) bool { return t.Name == "1.1.0" })
		g.Expect(i).NotTo(BeNumerically("<", 0))
		return tags[i]
	}
	g.Eventually(stored).Should(HaveField("Digest", first))
	pushed := stored(g).FirstSeen

	// Moved an hour later, while it waits: once its first age has passed,
	// it is found moved and waits again.
	testClock.Advance(time.Hour)
	moved := reg.PushImage(t, "acme/early", "1.1.0")
	testClock.Advance(72 * time.Hour)
	requestReconcile(t, pol)
	token := pol.GetAnnotations()[meta.ReconcileRequestAnnotation]
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(pol.Status.LastHandledReconcileAt).To(Equal(token))
		g.Expect(tag).To(Equal("1.0.0"), "1.1.0 moved while it waited")
		g.Expect(c.Message).To(ContainSubstring("1.1.0 waits for minReleaseAge"))
	}).Should(Succeed())
	g.Expect(stored(g)).To(And(HaveField("Digest", moved), HaveField("FirstSeen", BeTemporally(">", pushed.Add(72*time.Hour)))))
}
