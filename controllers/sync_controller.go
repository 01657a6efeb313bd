package controllers

// +kubebuilder:rbac:groups=uprev.dev,resources=syncs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=uprev.dev,resources=syncs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=uprev.dev,resources=synctargets,verbs=get;list;create;patch;delete;deletecollection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/cache"
	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"github.com/fluxcd/pkg/runtime/predicates"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/apply"
	"github.com/uprev-dev/uprev/internal/gitrepo"
)

// kubeConfigKey is the key of a kubeconfig in a target's Secret, as in Flux.
const kubeConfigKey = "value"

// SyncReconciler applies a Git path onto the targets of each Sync.
type SyncReconciler struct {
	reconciler
	// Clones keeps the clones of each repository, sharing one object store.
	Clones *gitrepo.Cache
	// LocalConfig reaches the cluster uprev runs in.
	LocalConfig *rest.Config
	// KubeConfig says what a target's kubeconfig may use (Flux's
	// --insecure-kubeconfig-exec and --insecure-kubeconfig-tls).
	KubeConfig runtimeclient.KubeConfigOptions
	// DefaultServiceAccount, when set, is impersonated in the Sync's
	// namespace to apply to the local cluster when the Sync names no
	// serviceAccountName (Flux's --default-service-account).
	DefaultServiceAccount string
	// Clock tells the time; the wall clock when nil.
	Clock clock.PassiveClock
	// ComponentInfo, when set, is the uprev_target_component_info gauge.
	ComponentInfo *TargetComponentMetric
	// TokenCache keeps GitHub App installation tokens while they are
	// fresh; nil fetches one for every run.
	TokenCache *cache.TokenCache

	// pushes are commits this manager pushed; the Syncs of their branch
	// reconcile at once.
	pushes *gitPushEvents
	// gitShares bounds the workers one Git server and one namespace hold in
	// Git work (takeGitShare); nil bounds nothing.
	gitShares *workerShares

	// appliers keeps the Applier of each target of each live Sync.
	appliers targetAppliers
	// shared is what the Appliers share: each API server's REST mapping
	// and the bound of the versions they remember.
	shared *apply.Shared
	// waits cancels the health wait of a run when a new one is due.
	waits healthWaits
}

// SetupWithManager registers the reconciler; opts sets its concurrency.
func (r *SyncReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.Client = mgr.GetClient()
	r.Events = mgr.GetEventRecorder("uprev-sync")
	if r.LocalConfig == nil {
		r.LocalConfig = mgr.GetConfig()
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.shared = apply.NewShared(r.Clock)
	r.gitShares = newWorkerShares(opts.MaxConcurrentReconciles)
	newRun := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))
	b := ctrl.NewControllerManagedBy(mgr).
		For(&uprevv1.Sync{}, newRun).
		// What starts a new run cancels the health wait of the one in progress.
		Watches(&uprevv1.Sync{}, r.waits.cancelOnUpdate(), newRun).
		WatchesRawSource(r.gitShares.Woken()).
		WithOptions(opts)
	if r.pushes != nil {
		b = b.WatchesRawSource(source.Channel(r.pushes.events, r.waits.cancelAndEnqueue()))
	}
	clusters, ok, err := clusterWatch(mgr.GetRESTMapper())
	if err != nil {
		return fmt.Errorf("setting up the Sync controller: %w", err)
	}
	if ok {
		b = b.Watches(clusters, handler.EnqueueRequestsFromMapFunc(r.syncsSelectingCluster), builder.WithPredicates(clusterChanged))
		secrets, err := r.kubeConfigSecretWatch(mgr)
		if err != nil {
			return fmt.Errorf("setting up the Sync controller: %w", err)
		}
		b = b.WatchesRawSource(secrets)
	} else {
		mgr.GetLogger().Info("Cluster API is not installed: Syncs read Clusters at their interval only")
	}
	return b.Complete(r)
}

// Reconcile applies one Sync.
func (r *SyncReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &uprevv1.Sync{}
	if err := r.Get(ctx, req.NamespacedName, s); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetObject(s, req.NamespacedName)
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if err := addFinalizer(ctx, r.Client, s, uprevv1.Finalizer); err != nil {
		return ctrl.Result{}, err
	}
	st := statusFields{&s.Status.ObservedGeneration, &s.Status.ReconcileRequestStatus}
	waitCancel, done := r.waits.start(req.NamespacedName)
	defer done()
	return r.run(ctx, s, st, s.Spec.Suspend, func(ctx context.Context, progress progressFunc) outcome {
		run := &syncRun{sync: s, progress: progress, waitCancel: waitCancel}
		err := r.reconcile(ctx, run)
		if run.records != nil {
			if ferr := r.finish(ctx, run); ferr != nil && err == nil {
				err = ferr
			}
			r.ComponentInfo.Publish(s, run.statuses())
		}
		o := outcome{err: err, message: run.summary(), requeueAfter: s.Spec.Interval.Duration}
		if run.pause > 0 && err == nil {
			o.err = degraded(uprevv1.RolloutInProgressReason, errors.New(run.summary()))
			o.requeueAfter = min(o.requeueAfter, run.pause)
		}
		return o
	})
}

// syncRun is the state one reconcile's phases share.
type syncRun struct {
	sync  *uprevv1.Sync
	waves [][]uprevv1.Target
	// pending are the targets whose Cluster is not ready to be applied
	// to: outside the waves, with a record saying why.
	pending  []pendingTarget
	revision string
	objects  []*unstructured.Unstructured
	// done counts the waves on the revision and healthy.
	done int
	// pause is the wait before the next wave may start, when it is waiting.
	pause time.Duration
	// progress reports long work in status.
	progress progressFunc
	// waitCancel ends the health waits of this run when a new run is due.
	waitCancel context.Context
	// records are the targets' SyncTargets by target name, once loaded.
	records map[string]*targetRecord
	// appliers are the targets' Appliers by target name; a target whose
	// Applier could not be had has its error in connectErrs instead.
	appliers    map[string]*apply.Applier
	connectErrs map[string]error
}

// reconcile runs the phases in order.
func (r *SyncReconciler) reconcile(ctx context.Context, run *syncRun) error {
	for _, phase := range []func(context.Context, *syncRun) error{r.validateSync, r.load, r.connect, r.build, r.rollOut} {
		if err := phase(ctx, run); err != nil {
			return err
		}
	}
	return nil
}

// validateSync checks the spec, resolves its targets and plans the waves.
func (r *SyncReconciler) validateSync(ctx context.Context, run *syncRun) error {
	if ref := run.sync.Spec.Git.Ref; ref.Branch == "" && ref.Tag == "" && ref.Commit == "" {
		return stalledf(uprevv1.InvalidSpecReason, "spec.git.ref needs a branch, a tag or a commit")
	}
	resolved, err := r.resolveTargets(ctx, run.sync)
	if err != nil {
		return err
	}
	run.pending = resolved.pending
	waves, err := run.sync.Spec.WavesOf(resolved.targets, func(target string) map[string]string { return resolved.labels[target] })
	if err != nil {
		return stalled(uprevv1.InvalidSpecReason, err)
	}
	run.waves = waves
	return nil
}

// load reads the targets' records.
func (r *SyncReconciler) load(ctx context.Context, run *syncRun) error {
	records, err := r.loadRecords(ctx, run.sync)
	if err != nil {
		return err
	}
	run.records = records
	return nil
}

// record returns the record of a target, adding one not yet written when
// it has none. It is called outside of waves only.
func (run *syncRun) record(target uprevv1.Target) *targetRecord {
	rec, ok := run.records[target.Name]
	if !ok {
		rec = newRecord(run.sync, target)
		run.records[target.Name] = rec
	}
	return rec
}

// status returns the recorded status of a target, or nil.
func (run *syncRun) status(target string) *uprevv1.TargetStatus {
	if rec, ok := run.records[target]; ok {
		return &rec.obj.Status
	}
	return nil
}

// statuses returns the recorded status of every target of the Sync's
// waves that has one, in wave order.
func (run *syncRun) statuses() []*uprevv1.TargetStatus {
	var out []*uprevv1.TargetStatus
	for _, wave := range run.waves {
		for _, t := range wave {
			if ts := run.status(t.Name); ts != nil {
				out = append(out, ts)
			}
		}
	}
	return out
}

// defaultMaxConcurrent bounds how many targets of a wave are applied at
// once.
const defaultMaxConcurrent = 32

// maxNamedTargets bounds how many targets a message names, so that a
// condition of a large fleet stays readable and within the API server's
// limit on a condition's message.
const maxNamedTargets = 10

// maxTargetMessage bounds the message of a target's record, so that the
// error of a revision with very many objects cannot make it too large.
const maxTargetMessage = 4096
