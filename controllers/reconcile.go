package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	fluxcontroller "github.com/fluxcd/pkg/runtime/controller"
	fluxmetrics "github.com/fluxcd/pkg/runtime/metrics"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// fieldManager is uprev's name in managed fields and server-side apply.
const fieldManager = "uprev"

// managedObject is an object reconciled with the shared shape.
type managedObject interface {
	client.Object
	statusObject
}

// statusFields points at the status fields every kind shares.
type statusFields struct {
	observedGeneration *int64
	requests           *meta.ReconcileRequestStatus
}

// reconciler holds what every uprev reconciler shares.
type reconciler struct {
	client.Client
	// Events records Kubernetes events.
	Events events.EventRecorder
	// minInterval is Options.MinInterval (atLeastMinInterval).
	minInterval time.Duration
	// readiness is the Ready condition each object's last run left.
	readiness readiness
}

// progressFunc marks an object Reconciling=True with a message saying what
// long work starts now, and patches it at once, so a person watching sees
// it. A failed patch is logged, not returned: the work goes on.
type progressFunc func(ctx context.Context, format string, args ...any)

// run is the one reconcile shape of every kind: a status writer, the
// suspend check, the kind's reconcile, then status (conditions,
// observedGeneration, the handled reconcile request, unless the run put its
// work off: outcome.putOff) written once by a final patch, and an event when readiness changes. The reconcile may
// report progress before long work through the status writer, whose
// final write then clears it.
func (r *reconciler) run(ctx context.Context, obj managedObject, st statusFields, suspended bool,
	reconcile func(context.Context, progressFunc) outcome) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	metrics := r.metrics()
	metrics.RecordSuspend(ctx, obj, suspended)
	if suspended {
		log.Info("Reconciliation is suspended")
		return ctrl.Result{}, nil
	}
	status := newStatusWriter(r.Client, obj)
	wasReady := conditions.Get(obj, meta.ReadyCondition)

	progress := func(ctx context.Context, format string, args ...any) {
		conditions.MarkReconciling(obj, meta.ProgressingReason, format, args...)
		if err := status.write(ctx, obj); err != nil {
			log.Error(err, "Reporting progress")
		}
	}
	// The request this run handles is the one it was started for: a
	// progress write returns the object as the API server has it, with a
	// request made since, which this run never saw and must leave for the
	// run that the request's own event starts.
	token, requested := meta.ReconcileAnnotationValue(obj.GetAnnotations())
	start := time.Now()
	o := reconcile(ctx, progress)
	var silent *silentRetryError
	if errors.As(o.err, &silent) {
		log.V(1).Info("Retrying shortly", "reason", silent.Error())
		return ctrl.Result{RequeueAfter: silent.retryAfter}, nil
	}

	if setConditions(obj, o) && !o.putOff() {
		*st.observedGeneration = obj.GetGeneration()
	}
	if requested && !o.putOff() {
		st.requests.SetLastHandledReconcileRequest(token)
	}
	patchErr := status.write(ctx, obj)
	if patchErr != nil {
		patchErr = client.IgnoreNotFound(patchErr)
	}
	r.eventOnReadyChange(obj, wasReady, o.unannounced)
	metrics.RecordDuration(ctx, obj, start)
	metrics.RecordReadiness(ctx, obj)
	metrics.RecordStalled(ctx, obj)
	log.V(1).Info("Reconcile finished", "duration", time.Since(start).String(), "error", o.err)

	res, err := o.result()
	res.RequeueAfter = atLeastMinInterval(obj, res.RequeueAfter, r.minInterval)
	return res, kerrors.NewAggregate([]error{err, patchErr})
}

// statusWriter writes an object's status as a reconcile changes it: one
// JSON merge patch of the status subresource per write, conditions and the
// rest together, and none when nothing changed. (Flux's patch helper sends
// the conditions and the rest of the status as two patches, which doubles
// what a first reconcile costs the API server.) The manager is the only
// writer of its objects' status, so the patch carries no resourceVersion.
// The patch is computed from the status alone, not the whole object as
// controller-runtime's MergeFrom does: a run that writes nothing costs no
// copy of the object, and one that writes costs the status, not the spec
// and metadata, twice in JSON.
type statusWriter struct {
	client client.Client
	// before is the JSON of the status as last written or read.
	before []byte
	// err is why the status as read could not be encoded.
	err error
}

// newStatusWriter returns the status writer of obj as read.
func newStatusWriter(c client.Client, obj client.Object) *statusWriter {
	before, err := statusJSON(obj)
	return &statusWriter{client: c, before: before, err: err}
}

// write patches what changed in obj's status since the last write.
func (w *statusWriter) write(ctx context.Context, obj client.Object) error {
	if w.err != nil {
		return w.err
	}
	after, err := statusJSON(obj)
	if err != nil {
		return err
	}
	diff, err := jsonpatch.CreateMergePatch(w.before, after)
	if err != nil {
		return fmt.Errorf("computing the status patch: %w", err)
	}
	if string(diff) == "{}" {
		return nil
	}
	data := append(append([]byte(`{"status":`), diff...), '}')
	if err := w.client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, data), client.FieldOwner(fieldManager)); err != nil {
		return err
	}
	// The status as the API server returned it.
	w.before, w.err = statusJSON(obj)
	return nil
}

// statusJSON is the JSON of obj's Status field, which every kind uprev
// reconciles has.
func statusJSON(obj client.Object) ([]byte, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	status := v.FieldByName("Status")
	if v.Kind() != reflect.Struct || !status.IsValid() {
		return nil, fmt.Errorf("computing the status patch: %T has no Status field", obj)
	}
	data, err := json.Marshal(status.Interface())
	if err != nil {
		return nil, fmt.Errorf("computing the status patch: %w", err)
	}
	return data, nil
}

// gotkRecorder is the GitOps Toolkit's reconcile metrics, as every Flux
// controller exports them (gotk_reconcile_duration_seconds,
// gotk_reconcile_condition, gotk_suspend_status), so that Flux's Grafana
// dashboards and alerts work on uprev's objects: one recorder per process,
// registered with controller-runtime's registry the first time it is used.
var gotkRecorder = sync.OnceValue(func() *fluxmetrics.Recorder {
	return fluxmetrics.MustMakeRecorder()
})

// metrics records the GitOps Toolkit metrics of the objects r reconciles.
func (r *reconciler) metrics() fluxcontroller.Metrics {
	return fluxcontroller.Metrics{Scheme: r.Scheme(), MetricsRecorder: gotkRecorder()}
}

// forgetObject drops what r keeps of the object key, of obj's kind, that is gone
// (deleted, or out of this manager's shard): its GitOps Toolkit metrics, so
// that series of deleted objects do not pile up, and its last readiness.
func (r *reconciler) forgetObject(obj client.Object, key types.NamespacedName) {
	r.readiness.forget(key)
	gvk, err := apiutil.GVKForObject(obj, r.Scheme())
	if err != nil {
		return
	}
	ref := corev1.ObjectReference{Kind: gvk.Kind, Namespace: key.Namespace, Name: key.Name}
	for _, c := range []string{meta.ReadyCondition, meta.StalledCondition} {
		gotkRecorder().DeleteCondition(ref, c)
	}
	gotkRecorder().DeleteSuspend(ref)
	gotkRecorder().DeleteDuration(ref)
}

// eventOnReadyChange records an event when the Ready condition changed its
// status or reason, but none for a first Ready=True that is unannounced.
// The change is against the Ready condition r's last run of obj left, when
// there was one: read, from the cache the run started from, can be older
// than that run's status write, and would announce its change again.
func (r *reconciler) eventOnReadyChange(obj managedObject, read *metav1.Condition, unannounced bool) {
	now := conditions.Get(obj, meta.ReadyCondition)
	before := r.readiness.swap(obj, read, now)
	if now == nil || (before != nil && before.Status == now.Status && before.Reason == now.Reason) {
		return
	}
	if unannounced && before == nil && now.Status == metav1.ConditionTrue {
		return
	}
	kind := corev1.EventTypeNormal
	if now.Status != metav1.ConditionTrue {
		kind = corev1.EventTypeWarning
	}
	r.Events.Eventf(obj, nil, kind, now.Reason, "Reconcile", "%s", now.Message)
}

// readiness remembers, by object, the Ready condition that the object's
// last run left: one entry per object the manager reconciles, dropped
// when the object is gone (reconciler.forgetObject). The zero value is ready to
// use.
type readiness struct {
	mu   sync.Mutex
	last map[types.NamespacedName]lastReady
}

// lastReady is the Ready condition one run left on the object of uid.
type lastReady struct {
	uid   types.UID
	ready metav1.Condition
}

// swap returns the Ready condition obj's last run left, or read (the
// object as this run read it) when there was none for this object (a
// restarted manager, or an object deleted and made again under its name),
// and remembers now as the one this run left.
func (m *readiness) swap(obj client.Object, read, now *metav1.Condition) *metav1.Condition {
	key := client.ObjectKeyFromObject(obj)
	m.mu.Lock()
	defer m.mu.Unlock()
	before := read
	if last, ok := m.last[key]; ok && last.uid == obj.GetUID() {
		before = &last.ready
	}
	if now != nil {
		if m.last == nil {
			m.last = map[types.NamespacedName]lastReady{}
		}
		m.last[key] = lastReady{uid: obj.GetUID(), ready: *now}
	}
	return before
}

// forget drops what m remembers of the object key.
func (m *readiness) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, key)
}
