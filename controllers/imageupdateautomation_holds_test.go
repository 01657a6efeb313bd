package controllers

import (
	"context"
	"strings"
	"testing"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// publishedHolds reads the holds auto publishes in its annotation.
func publishedHolds(g Gomega, auto *iacv1.ImageUpdateAutomation) []uprevv1.Hold {
	p, err := uprevv1.DecodeHolds(getFluxAutomation(g, auto).Annotations[uprevv1.HoldsAnnotation])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Omitted).To(BeZero())
	return p.Holds
}

// fluxRuns counts the runs of the ImageUpdateAutomation ns/name so far.
func fluxRuns(g Gomega, ns, name string) uint64 {
	series := gotkSeries(g, "gotk_reconcile_duration_seconds", iacv1.ImageUpdateAutomationKind, ns, name)
	g.Expect(series).To(HaveLen(1))
	return series[0].GetHistogram().GetSampleCount()
}

// TestImageUpdateAutomationPublishesHolds: the holds of a Flux
// ImageUpdateAutomation, which its status has no field for, are published
// in the annotation status.uprev.dev/holds, owned by uprev's field manager:
// a revert makes the hold appear there, publishing it does not run the
// automation again, a GitOps tool applying the object (server-side, as
// kustomize-controller does) leaves it alone, and releasing the hold
// removes it.
func TestImageUpdateAutomationPublishesHolds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{
		"clusters/my-cluster/agent.yaml": agentDeployment,
	}, gitserver.WithBasicAuth("flux", "s3cret"))
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.0.0")
	f.fluxSource()
	auto := f.fluxAutomation()
	f.pushTag("1.1.0")
	st := waitForFluxPush(t, auto, "")
	g.Expect(auto.Annotations).NotTo(HaveKey(uprevv1.HoldsAnnotation), "nothing held, nothing published")
	var runs uint64
	g.Eventually(func(g Gomega) { runs = fluxRuns(g, f.ns, auto.Name) }).Should(Succeed())

	// A person reverts the commit: the hold is published, in one run.
	revert := f.git.Revert(t, fleetRepo, "main", st.LastPushCommit)
	requestFluxRun(t, auto)
	g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(HaveSuffix("1 held"))
	held := []uprevv1.Hold{{Policy: f.ns + "/agent", Version: "1.1.0", RevertedIn: revert}}
	g.Expect(publishedHolds(g, auto)).To(Equal(held))
	g.Expect(auto.Annotations[uprevv1.HoldsAnnotation]).To(Equal(uprevv1.EncodeHolds(held)))
	g.Eventually(func(g Gomega) uint64 { return fluxRuns(g, f.ns, auto.Name) }).Should(Equal(runs + 1))
	g.Consistently(func(g Gomega) uint64 { return fluxRuns(g, f.ns, auto.Name) }, "2s").Should(Equal(runs+1),
		"publishing the holds does not run the automation again")
	var owners []string
	g.Expect(apiServer.Get(context.Background(), client.ObjectKeyFromObject(auto), auto)).To(Succeed())
	for _, m := range auto.ManagedFields {
		if m.FieldsV1 != nil && strings.Contains(m.FieldsV1.GetRawString(), `"f:`+uprevv1.HoldsAnnotation+`"`) {
			owners = append(owners, m.Manager+" "+string(m.Operation))
		}
	}
	g.Expect(owners).To(Equal([]string{"uprev Update"}))

	// kustomize-controller applies the object as Git has it (server-side,
	// forcing ownership), with a new interval: the holds stay published,
	// and the run the new generation starts publishes the same again.
	applied := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(strings.Replace(fluxImageUpdateAutomation, "interval: 30m", "interval: 20m", 1)), &applied.Object)).To(Succeed())
	applied.SetNamespace(f.ns)
	g.Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner("kustomize-controller"), client.ForceOwnership)).To(Succeed())
	g.Eventually(func(g Gomega) {
		getFluxAutomation(g, auto)
		g.Expect(auto.Status.ObservedGeneration).To(Equal(auto.Generation))
	}).Should(Succeed())
	g.Expect(publishedHolds(g, auto)).To(Equal(held))

	// Releasing the hold (as `uprev release-hold` does) writes the version
	// again and removes the published hold.
	g.Expect(k8s.Patch(ctx, &iacv1.ImageUpdateAutomation{ObjectMeta: auto.ObjectMeta}, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+uprevv1.HoldReleaseAnnotation+`":"`+f.ns+`/agent 1.1.0"}}}`)))).To(Succeed())
	waitForFluxPush(t, auto, st.LastPushCommit)
	g.Eventually(func(g Gomega) {
		g.Expect(getFluxAutomation(g, auto).Annotations).NotTo(HaveKey(uprevv1.HoldsAnnotation))
	}).Should(Succeed())
	g.Expect(auto.Annotations).To(HaveKey(uprevv1.HoldReleaseAnnotation))
}

// TestImageUpdateAutomationPublishesRefusedDowngrades: the downgrades a
// Flux ImageUpdateAutomation refuses (Git holds a higher version than its
// policy selects), which its status has no field for, are published in the
// same annotation as the holds, with no commit made; once the policy
// selects Git's version again, nothing is refused and the annotation is
// removed.
func TestImageUpdateAutomationPublishesRefusedDowngrades(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newAutomationFixture(t, []string{"1.0.0", "1.5.0", "2.0.0"}, map[string]string{
		"clusters/my-cluster/agent.yaml": withVersion(agentMarked, "2.0.0"),
	}, gitserver.WithBasicAuth("flux", "s3cret"))
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0 <2.0.0"))
	waitForLatestTag(t, pol, "1.5.0")
	base := f.tip("main")
	f.fluxSource()
	auto := f.fluxAutomation()

	refused := []uprevv1.RefusedDowngrade{{Policy: f.ns + "/agent", File: "clusters/my-cluster/agent.yaml", Current: "2.0.0", Selected: "1.5.0"}}
	g.Eventually(func(g Gomega) {
		p, err := uprevv1.DecodeHolds(getFluxAutomation(g, auto).Annotations[uprevv1.HoldsAnnotation])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p).To(Equal(uprevv1.PublishedHolds{RefusedDowngrades: refused}))
		g.Expect(conditions.IsReady(auto)).To(BeTrue())
		g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(ContainSubstring("1 downgrades refused"))
	}).Should(Succeed())
	g.Expect(f.tip("main")).To(Equal(base), "the downgrade is not written")
	g.Expect(auto.Status.LastPushCommit).To(BeEmpty())

	// The policy selects Git's version again: nothing is refused any more.
	g.Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pol), pol); err != nil {
			return err
		}
		pol.Spec.Policy = semverChoice(">=1.0.0")
		return k8s.Update(ctx, pol)
	}).Should(Succeed())
	waitForLatestTag(t, pol, "2.0.0")
	g.Eventually(func(g Gomega) {
		g.Expect(getFluxAutomation(g, auto).Annotations).NotTo(HaveKey(uprevv1.HoldsAnnotation))
	}).Should(Succeed())
	g.Expect(f.tip("main")).To(Equal(base))
}
