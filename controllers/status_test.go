package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestOutcomeConditionsAndResult(t *testing.T) {
	for _, tc := range []struct {
		name         string
		outcome      outcome
		ready        metav1.ConditionStatus
		reason       string
		stalled      bool
		reconciling  bool
		observed     bool
		returnsError bool
		requeue      bool
	}{
		{name: "success", outcome: outcome{message: "ok", requeueAfter: time.Minute},
			ready: metav1.ConditionTrue, reason: meta.SucceededReason, observed: true, requeue: true},
		{name: "configuration error", outcome: outcome{err: stalledf("InvalidPolicy", "bad range"), requeueAfter: time.Minute},
			ready: metav1.ConditionFalse, reason: "InvalidPolicy", stalled: true, observed: true},
		{name: "transient error", outcome: outcome{err: transient("AuthenticationFailed", errors.New("401")), requeueAfter: time.Minute},
			ready: metav1.ConditionFalse, reason: "AuthenticationFailed", reconciling: true, returnsError: true},
		{name: "transient error with a wait asked for", outcome: outcome{err: transientAfter("PullRequestFailed", errors.New("429"), time.Minute)},
			ready: metav1.ConditionFalse, reason: "PullRequestFailed", reconciling: true, requeue: true},
		{name: "partial failure", outcome: outcome{err: degraded("UpdateFailed", errors.New("a.yaml")), requeueAfter: time.Minute},
			ready: metav1.ConditionFalse, reason: "UpdateFailed", observed: true, requeue: true},
		{name: "unexpected error", outcome: outcome{err: errors.New("boom")},
			ready: metav1.ConditionFalse, reason: meta.FailedReason, reconciling: true, returnsError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := &imagev1.ImagePolicy{}
			// A stale Stalled condition from an earlier run must not survive.
			conditions.MarkStalled(obj, "Old", "old")
			observed := setConditions(obj, tc.outcome)
			g.Expect(observed).To(Equal(tc.observed))
			ready := conditions.Get(obj, meta.ReadyCondition)
			g.Expect(ready.Status).To(Equal(tc.ready))
			g.Expect(ready.Reason).To(Equal(tc.reason))
			g.Expect(conditions.IsStalled(obj)).To(Equal(tc.stalled))
			g.Expect(conditions.IsReconciling(obj)).To(Equal(tc.reconciling))

			res, err := tc.outcome.result()
			g.Expect(err != nil).To(Equal(tc.returnsError))
			g.Expect(res.RequeueAfter > 0).To(Equal(tc.requeue))
		})
	}
}

func TestWaitingLeavesReadyAsItWas(t *testing.T) {
	g := NewWithT(t)
	obj := &imagev1.ImagePolicy{}
	conditions.MarkTrue(obj, meta.ReadyCondition, meta.SucceededReason, "applied")
	o := outcome{err: waiting("GitSlotsBusy", time.Second, errors.New("namespace busy")), requeueAfter: time.Hour}

	g.Expect(setConditions(obj, o)).To(BeFalse(), "a wait observes nothing")
	ready := conditions.Get(obj, meta.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(ready.Message).To(Equal("applied"))
	g.Expect(conditions.GetReason(obj, meta.ReconcilingCondition)).To(Equal("GitSlotsBusy"))
	res, err := o.result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeNumerically("~", time.Second, 500*time.Millisecond))
}

// TestStatusWriterPatchesWhatChangedInTheStatus: against the API server,
// the writer sends one merge patch of the status when it changed, removing
// what was taken out, and none when it did not; the spec stays as stored.
func TestStatusWriterPatchesWhatChangedInTheStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newRepository(t, ns, "ghcr.io/acme/agent", func(r *imagev1.ImageRepository) { r.Spec.Suspend = true })
	direct, err := client.NewWithWatch(testCluster.Config, client.Options{Scheme: k8s.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	var patches []string
	c := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			patches = append(patches, sub+" "+string(data))
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	g.Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(repo), repo) }).Should(Succeed())

	w := newStatusWriter(c, repo)
	g.Expect(w.write(ctx, repo)).To(Succeed())
	g.Expect(patches).To(BeEmpty(), "nothing changed")

	repo.Spec.Image = "ghcr.io/acme/other"
	repo.Status.CanonicalImageName = "ghcr.io/acme/agent"
	repo.Status.ObservedExclusionList = []string{"^x$"}
	g.Expect(w.write(ctx, repo)).To(Succeed())
	repo.Status.ObservedExclusionList = nil
	g.Expect(w.write(ctx, repo)).To(Succeed())
	g.Expect(w.write(ctx, repo)).To(Succeed())
	g.Expect(patches).To(Equal([]string{
		`status {"status":{"canonicalImageName":"ghcr.io/acme/agent","observedExclusionList":["^x$"]}}`,
		`status {"status":{"observedExclusionList":null}}`,
	}))

	var stored imagev1.ImageRepository
	g.Expect(apiServer.Get(ctx, client.ObjectKeyFromObject(repo), &stored)).To(Succeed())
	g.Expect(stored.Status.CanonicalImageName).To(Equal("ghcr.io/acme/agent"))
	g.Expect(stored.Status.ObservedExclusionList).To(BeEmpty())
	g.Expect(stored.Spec.Image).To(Equal("ghcr.io/acme/agent"), "a status write leaves the spec")
}
