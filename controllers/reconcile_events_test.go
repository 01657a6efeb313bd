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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/source"
)

// TestReadyChangeAnnouncedOnceFromALaggingCache: runs that start from the
// same cached object, older than the status an earlier run wrote (the cache
// lags the manager's own writes when the machine is busy), announce a change
// of Ready once, not once per run; a change made from that old object is
// still announced, and so is the first failure of an object made again
// under the same name, or seen again after it was gone.
func TestReadyChangeAnnouncedOnceFromALaggingCache(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(imagev1.AddToScheme(scheme)).To(Succeed())
	cached := &imagev1.ImageRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "agent", UID: "first"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(cached).WithObjects(cached.DeepCopy()).Build()
	recorder := events.NewFakeRecorder(10)
	r := &reconciler{Client: c, Events: recorder}
	refused := outcome{err: transient("AuthenticationFailed", errors.New("401 Unauthorized"))}
	scanned := outcome{message: "scanned 3 tags"}
	runFrom := func(obj *imagev1.ImageRepository, o outcome) {
		obj = obj.DeepCopy()
		st := statusFields{&obj.Status.ObservedGeneration, &obj.Status.ReconcileRequestStatus}
		_, _ = r.run(context.Background(), obj, st, false, func(context.Context, progressFunc) outcome { return o })
	}

	runFrom(cached, refused)
	runFrom(cached, refused)
	g.Expect(drain(recorder)).To(Equal([]string{"Warning AuthenticationFailed 401 Unauthorized"}),
		"the second run starts from the object as it was before the first run wrote its status: the failure is not new")

	runFrom(cached, scanned)
	g.Expect(drain(recorder)).To(Equal([]string{"Normal Succeeded scanned 3 tags"}), "the recovery is a change, whatever the cache says")

	again := cached.DeepCopy()
	again.UID = "second"
	runFrom(again, refused)
	g.Expect(drain(recorder)).To(Equal([]string{"Warning AuthenticationFailed 401 Unauthorized"}), "an object made again under the name is new")

	r.forgetObject(again, client.ObjectKeyFromObject(again))
	runFrom(again, refused)
	g.Expect(drain(recorder)).To(Equal([]string{"Warning AuthenticationFailed 401 Unauthorized"}), "an object seen again after it was gone")
	g.Expect(r.readiness.last).To(HaveKey(types.NamespacedName{Namespace: "team", Name: "agent"}))
	r.forgetObject(again, client.ObjectKeyFromObject(again))
	g.Expect(r.readiness.last).To(BeEmpty(), "a gone object leaves nothing behind")
}

// drain returns the events recorded so far, as "type reason message".
func drain(recorder *events.FakeRecorder) []string {
	var recorded []string
	for {
		select {
		case e := <-recorder.Events:
			recorded = append(recorded, e)
		default:
			return recorded
		}
	}
}

// TestGoneReleaseSourceLeavesNoSeries: the reconcile that finds a
// ReleaseSource gone drops its GitOps Toolkit series, as every other kind's
// does, so that series of deleted objects do not pile up.
func TestGoneReleaseSourceLeavesNoSeries(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	g.Expect(uprevv1.AddToScheme(scheme)).To(Succeed())
	rs := &uprevv1.ReleaseSource{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "gone-source"}}
	conditions.MarkTrue(rs, meta.ReadyCondition, meta.SucceededReason, "followed")
	r := &ReleaseSourceReconciler{reconciler: reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).Build()},
		Sources: source.NewClient(source.Options{})}
	r.metrics().RecordReadiness(ctx, rs)
	r.metrics().RecordDuration(ctx, rs, time.Now())
	g.Expect(gotkSeries(g, "gotk_reconcile_condition", "ReleaseSource", "team", "gone-source")).NotTo(BeEmpty())

	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rs)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gotkSeries(g, "gotk_reconcile_condition", "ReleaseSource", "team", "gone-source")).To(BeEmpty())
	g.Expect(gotkSeries(g, "gotk_reconcile_duration_seconds", "ReleaseSource", "team", "gone-source")).To(BeEmpty())
}
