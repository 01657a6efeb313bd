package controllers

// +kubebuilder:rbac:groups=uprev.dev,resources=syncs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=uprev.dev,resources=syncs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=uprev.dev,resources=synctargets,verbs=get;list;create;patch;delete;deletecollection

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/cache"
	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"github.com/fluxcd/pkg/runtime/predicates"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/uprev-dev/uprev/internal/kubeconfig"
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
			r.forgetMetrics(s, req.NamespacedName)
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

// finish brings the records in line with the targets once the rollout
// did what it could: records of a Sync written by an earlier uprev are all
// written, then its status.targets emptied; the records of pending
// targets say why they wait; the records of targets no longer in the Sync
// are deleted (the targets are released, their objects left in place);
// and each step's counts are set.
func (r *SyncReconciler) finish(ctx context.Context, run *syncRun) error {
	s := run.sync
	if len(s.Status.Targets) > 0 {
		for _, name := range slices.Sorted(maps.Keys(run.records)) {
			if err := r.writeRecord(ctx, run.records[name]); err != nil {
				return err
			}
		}
		s.Status.Targets = nil
	}
	for _, p := range run.pending {
		rec := run.record(p.target)
		rec.obj.Status.Reason = uprevv1.ClusterNotProvisionedReason
		rec.obj.Status.Message = p.message
		if err := r.writeRecord(ctx, rec); err != nil {
			return err
		}
	}
	if run.waves != nil {
		current := map[string]bool{}
		for _, p := range run.pending {
			current[p.target.Name] = true
		}
		for _, wave := range run.waves {
			for _, t := range wave {
				current[t.Name] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(run.records)) {
			rec := run.records[name]
			if current[name] || rec.written == nil {
				continue
			}
			if err := r.Delete(ctx, rec.written); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("releasing target %s: deleting SyncTarget %s: %w", name, rec.written.Name, err)
			}
			delete(run.records, name)
		}
		r.appliers.retain(client.ObjectKeyFromObject(s), current)
		s.Status.Steps = stepCounts(run.waves, s.Status.Steps, s.Status.LastAttemptedRevision, run.status)
	}
	return nil
}

// connect finds the Applier of every target before anything is fetched or
// applied, so a refused kubeconfig stops the whole revision. Other
// failures (a missing Secret) are kept for their target alone.
func (r *SyncReconciler) connect(ctx context.Context, run *syncRun) error {
	run.appliers = map[string]*apply.Applier{}
	run.connectErrs = map[string]error{}
	for _, target := range slices.Concat(run.waves...) {
		a, err := r.applier(ctx, run.sync, target)
		var stall *stalledError
		switch {
		case errors.As(err, &stall):
			return stalled(stall.reason, fmt.Errorf("target %s: %w", target.Name, err))
		case err != nil:
			run.connectErrs[target.Name] = err
		default:
			run.appliers[target.Name] = a
		}
	}
	return nil
}

// build fetches the revision and builds its manifests, in a share of the
// workers of its Git server and namespace (takeGitShare); a build error
// applies nothing.
func (r *SyncReconciler) build(ctx context.Context, run *syncRun) error {
	spec := run.sync.Spec
	release, err := takeGitShare(r.gitShares, r.Clock.Now(), client.ObjectKeyFromObject(run.sync), spec.Git.URL, "")
	if err != nil {
		return err
	}
	remote, err := gitRemote(ctx, r.Client, r.TokenCache, gitAccess{kind: "Sync", object: run.sync, secretNamespace: run.sync.Namespace}, spec.Git)
	if err != nil {
		release(nil)
		return err
	}
	ref := gitrepo.Ref{Branch: spec.Git.Ref.Branch, Tag: spec.Git.Ref.Tag, Commit: spec.Git.Ref.Commit}
	session, revision, err := r.Clones.OpenRevision(ctx, remote, ref, objectID("Sync", client.ObjectKeyFromObject(run.sync)))
	defer release(err)
	if err != nil {
		if errors.Is(err, gitrepo.ErrInvalidRef) {
			return stalled(uprevv1.InvalidSpecReason, fmt.Errorf("spec.git.ref: %w", err))
		}
		return gitError(fmt.Errorf("fetching %s: %w", remote.Redacted(), err))
	}
	defer session.Close()
	run.revision = revision
	run.sync.Status.LastAttemptedRevision = run.revision
	objects, err := apply.BuildWithin(session.Dir(), spec.Path)
	if err != nil {
		var buildErr *apply.BuildError
		if errors.As(err, &buildErr) {
			return degraded(uprevv1.BuildFailedReason, fmt.Errorf("revision %s: %w", run.revision, err))
		}
		return fmt.Errorf("building %s: %w", run.revision, err)
	}
	run.objects = objects
	return nil
}

// rollOut applies the revision wave by wave: a wave starts when the earlier
// ones applied the revision (healthy, when waiting) and their pause is
// over. A failed wave stops the rollout there, unless spec.rollout
// tolerates failures (maxFailures): then the rollout goes on while no
// more targets than that failed, and stops with RolloutStopped past it.
// Failed targets are tried again at each run.
func (r *SyncReconciler) rollOut(ctx context.Context, run *syncRun) error {
	spec := run.sync.Spec
	total := len(slices.Concat(run.waves...))
	allowed, err := spec.Rollout.FailuresAllowed(total)
	if err != nil {
		return stalled(uprevv1.InvalidSpecReason, err)
	}
	tolerates := spec.Rollout != nil && spec.Rollout.MaxFailures != nil
	var tolerated []error
	for i, wave := range run.waves {
		if i > 0 {
			earlier := slices.Concat(run.waves[:i]...)
			wait, ready := waveGate(earlier, run.status, run.revision, spec.Wait, tolerates, spec.Rollout.PauseAfter(i-1), r.Clock.Now())
			if !ready {
				return errors.Join(tolerated...)
			}
			if wait > 0 {
				run.pause = wait
				return errors.Join(tolerated...)
			}
		}
		if len(wave) > 0 {
			run.progress(ctx, "applying %s to %s", run.revision, targetNames(wave))
		}
		if err := r.applyWave(ctx, run, wave); err != nil {
			if !tolerates {
				return err
			}
			// Later steps' failures, of earlier runs, are retried when
			// their step comes: they do not count yet.
			if failed := failedOn(run.waves[:i+1], run.revision, run.status); failed > allowed {
				return transient(uprevv1.RolloutStoppedReason, fmt.Errorf("stopped at step %d of %d: %d of %d targets failed, more than maxFailures %s allows (%d): %w",
					i+1, len(run.waves), failed, total, spec.Rollout.MaxFailures.String(), allowed, err))
			}
			tolerated = append(tolerated, err)
		}
		run.done++
	}
	return errors.Join(tolerated...)
}

// defaultMaxConcurrent bounds how many targets of a wave are applied at
// once.
const defaultMaxConcurrent = 32

// maxConcurrent is how many targets of a Sync are applied at once.
func maxConcurrent(s *uprevv1.Sync) int {
	if s.Spec.Rollout != nil && s.Spec.Rollout.MaxConcurrent > 0 {
		return s.Spec.Rollout.MaxConcurrent
	}
	return defaultMaxConcurrent
}

// applyWave applies the revision to the targets of a wave, up to
// maxConcurrent at once, and writes each target's record as soon as
// it is done; it fails when any target failed or could not record what it
// did.
func (r *SyncReconciler) applyWave(ctx context.Context, run *syncRun, wave []uprevv1.Target) error {
	records := make([]*targetRecord, len(wave))
	for i, target := range wave {
		records[i] = run.record(target)
		records[i].obj.Spec.KubeConfig = target.KubeConfig
	}
	errs := make([]error, len(wave))
	slots := make(chan struct{}, maxConcurrent(run.sync))
	var wg sync.WaitGroup
	for i, target := range wave {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			res := r.applyTarget(ctx, run, target, records[i])
			r.recordTarget(run, records[i], res)
			errs[i] = cmp.Or(res.err, r.writeRecord(ctx, records[i]))
		}()
	}
	wg.Wait()

	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", wave[i].Name, err))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	// The reason is that of any target; the message names the first few.
	all := errors.Join(failed...)
	err := fmt.Errorf("rollout of %s stopped: %w", run.revision, targetErrors(failed))
	if errors.Is(all, apply.ErrWaitCancelled) {
		// A new run is queued already: Ready stays as it was meanwhile.
		return waiting(uprevv1.HealthWaitCancelledReason, time.Second, fmt.Errorf("%w: a new revision, request or spec arrived", err))
	}
	var health *apply.HealthError
	if errors.As(all, &health) {
		return transient(uprevv1.HealthCheckFailedReason, err)
	}
	var retry *transientError
	if errors.As(all, &retry) && (retry.reason == uprevv1.SecretNotFoundReason || retry.reason == uprevv1.StatusWriteFailedReason) {
		return transient(retry.reason, err)
	}
	return transient(uprevv1.ApplyFailedReason, err)
}

// maxNamedTargets bounds how many targets a message names, so that a
// condition of a large fleet stays readable and within the API server's
// limit on a condition's message.
const maxNamedTargets = 10

// targetNames lists the names of targets, the first maxNamedTargets of
// them.
func targetNames(targets []uprevv1.Target) string {
	names := make([]string, 0, min(len(targets), maxNamedTargets))
	for _, t := range targets[:min(len(targets), maxNamedTargets)] {
		names = append(names, t.Name)
	}
	if more := len(targets) - len(names); more > 0 {
		return fmt.Sprintf("%s and %d more", strings.Join(names, ", "), more)
	}
	return strings.Join(names, ", ")
}

// targetErrors joins the errors of failed targets, the first
// maxNamedTargets of them, saying how many more failed.
func targetErrors(errs []error) error {
	shown := errs[:min(len(errs), maxNamedTargets)]
	if more := len(errs) - len(shown); more > 0 {
		shown = append(slices.Clone(shown), fmt.Errorf("and %d more targets failed", more))
	}
	return errors.Join(shown...)
}

// targetResult is what applying to one target gave.
type targetResult struct {
	target uprevv1.Target
	result apply.Result
	err    error
}

// applyTarget applies the revision to one target, from the inventory its
// record holds.
func (r *SyncReconciler) applyTarget(ctx context.Context, run *syncRun, target uprevv1.Target, rec *targetRecord) targetResult {
	res := targetResult{target: target}
	applier, ok := run.appliers[target.Name]
	if !ok {
		res.err = run.connectErrs[target.Name]
		return res
	}
	opts := r.applyOptions(run.sync, target)
	opts.WaitCancel = run.waitCancel
	opts.BeforeWrite = func(ctx context.Context, inventory []apply.Entry) error {
		return r.recordInventory(ctx, rec, inventory)
	}
	res.result, res.err = applier.Apply(ctx, run.objects, rec.inventory(), opts)
	return res
}

// recordInventory writes a target's inventory into its record before the
// target is written to, so that a manager that dies mid-apply prunes, on
// its next run, what it had written.
func (r *SyncReconciler) recordInventory(ctx context.Context, rec *targetRecord, inventory []apply.Entry) error {
	setInventory(&rec.obj.Status, inventory)
	return r.writeRecord(ctx, rec)
}

// setInventory makes a target's status list inventory.
func setInventory(ts *uprevv1.TargetStatus, inventory []apply.Entry) {
	ts.Inventory = ts.Inventory[:0]
	for _, e := range inventory {
		ts.Inventory = append(ts.Inventory, uprevv1.InventoryEntry{ID: e.ID, Version: e.Version})
	}
}

// applyOptions are the options of applying a Sync to one target: the
// local cluster as the Sync's service account, or the manager's default
// one, when either is set.
func (r *SyncReconciler) applyOptions(s *uprevv1.Sync, target uprevv1.Target) apply.Options {
	opts := apply.Options{
		Prune:            s.Spec.Prune,
		Wait:             s.Spec.Wait,
		Timeout:          s.GetTimeout(),
		DefaultNamespace: s.Namespace,
		Owner:            syncOwner(s),
	}
	if target.KubeConfig == nil {
		opts.ServiceAccount = cmp.Or(s.Spec.ServiceAccountName, r.DefaultServiceAccount)
		opts.ServiceAccountNamespace = s.Namespace
	}
	return opts
}

// applier returns the Applier of a target: the local cluster, or the one
// the target's kubeconfig Secret reaches. Appliers are kept per target and
// kubeconfig content, so a kubeconfig is checked once, before its first
// use, and again when it changes; targets that reach one API server with
// one kubeconfig connection (kubeconfig.ConnectionKey: server, CA and
// every credential field) share one Applier, never targets of different
// credentials.
func (r *SyncReconciler) applier(ctx context.Context, s *uprevv1.Sync, target uprevv1.Target) (*apply.Applier, error) {
	key, data := localConnection, []byte(nil)
	if ref := target.KubeConfig; ref != nil {
		secret, err := secretData(ctx, r.Client, s.Namespace, ref.SecretRef.Name)
		if err != nil {
			return nil, err
		}
		var ok bool
		if data, ok = secret[kubeConfigKey]; !ok {
			return nil, stalledf(uprevv1.InvalidSpecReason, "secret %s/%s has no %q key with a kubeconfig", s.Namespace, ref.SecretRef.Name, kubeConfigKey)
		}
		sum := sha256.Sum256(data)
		key = hex.EncodeToString(sum[:])
	}
	syncKey := client.ObjectKeyFromObject(s)
	if a, ok := r.appliers.get(syncKey, target.Name, key); ok {
		return a, nil
	}
	config, conn := r.LocalConfig, localConnection
	if data != nil {
		var err error
		if config, err = kubeconfig.RESTConfig(data, r.KubeConfig); err != nil {
			return nil, stalledf(uprevv1.KubeConfigRefusedReason, "secret %s/%s: %w", s.Namespace, target.KubeConfig.SecretRef.Name, err)
		}
		if conn, err = kubeconfig.ConnectionKey(data); err != nil {
			return nil, stalledf(uprevv1.KubeConfigRefusedReason, "secret %s/%s: %w", s.Namespace, target.KubeConfig.SecretRef.Name, err)
		}
	}
	a, err := r.appliers.put(syncKey, target.Name, key, conn, func() (*apply.Applier, error) { return apply.NewApplier(config) })
	if err != nil {
		return nil, fmt.Errorf("connecting to target %s: %w", target.Name, err)
	}
	return a, nil
}

// maxTargetMessage bounds the message of a target's record, so that the
// error of a revision with very many objects cannot make it too large.
const maxTargetMessage = 4096

// recordTarget writes a target's outcome into its record and records an
// event when something changed in the cluster.
func (r *SyncReconciler) recordTarget(run *syncRun, rec *targetRecord, res targetResult) {
	s := run.sync
	ts := &rec.obj.Status
	ts.Reason = ""
	if res.result.Inventory != nil {
		setInventory(ts, res.result.Inventory)
	}
	if res.result.Changed() {
		r.Events.Eventf(s, nil, corev1.EventTypeNormal, "Applied", "Apply", "%s to %s: %s",
			run.revision, res.target.Name, changeSummary(res.result))
	}
	if errors.Is(res.err, apply.ErrWaitCancelled) {
		// No outcome: the run queued already applies the target again and
		// waits anew. Recording the revision as attempted would show the
		// target as failed, and count it against maxFailures, meanwhile.
		// Health on the applied revision stays; a new one is not healthy yet.
		if ts.LastAppliedRevision != run.revision {
			ts.Healthy, ts.HealthySince = false, nil
		}
		ts.Message = cutMessage(res.err.Error(), maxTargetMessage)
		return
	}
	ts.LastAttemptedRevision = run.revision
	ts.Healthy = res.result.Health == apply.HealthHealthy
	ts.HealthySince = healthySince(ts.HealthySince, ts.LastAppliedRevision, run.revision, ts.Healthy && res.err == nil, r.Clock.Now())
	if res.err != nil {
		ts.Healthy = false
		ts.Message = cutMessage(res.err.Error(), maxTargetMessage)
	} else {
		// The time a revision reached the target: applying it again (every
		// interval, correcting drift) keeps it, so that the pause before
		// the next wave counts from when this wave got the revision.
		if ts.LastAppliedRevision != run.revision || ts.LastAppliedTime == nil {
			now := metav1.NewTime(r.Clock.Now())
			ts.LastAppliedTime = &now
		}
		ts.LastAppliedRevision = run.revision
		ts.Components, ts.ComponentsOmitted = appliedComponents(run.objects, res.result, s.Namespace)
		ts.Message = fmt.Sprintf("applied %d objects", len(res.result.Inventory))
	}
}

// healthySince is when a target has been healthy since, after a run that
// applied revision to it, where it had applied previous before: the time
// it had when it stays healthy on the same revision, now when it just
// became healthy or is healthy on a new revision, and nil when it is not
// healthy.
func healthySince(since *metav1.Time, previous, revision string, healthy bool, now time.Time) *metav1.Time {
	switch {
	case !healthy:
		return nil
	case since != nil && previous == revision:
		return since
	default:
		t := metav1.NewTime(now)
		return &t
	}
}

// changeSummary lists what an apply created, configured (drift included)
// and deleted.
func changeSummary(res apply.Result) string {
	var parts []string
	for _, group := range []struct {
		verb string
		ids  []string
	}{{"created", res.Created()}, {"configured", res.Configured()}, {"deleted", res.Deleted()}} {
		if len(group.ids) == 0 {
			continue
		}
		shown := group.ids[:min(len(group.ids), 10)]
		line := group.verb + " " + strings.Join(shown, ", ")
		if more := len(group.ids) - len(shown); more > 0 {
			line += fmt.Sprintf(" and %d more", more)
		}
		parts = append(parts, line)
	}
	return strings.Join(parts, "; ")
}

// summary is the Ready message of a reconcile.
func (run *syncRun) summary() string {
	if run.done == len(run.waves) {
		targets := 0
		for _, wave := range run.waves {
			targets += len(wave)
		}
		msg := fmt.Sprintf("applied %s to %d targets", run.revision, targets)
		if len(run.pending) > 0 {
			waiting := make([]uprevv1.Target, 0, len(run.pending))
			for _, p := range run.pending {
				waiting = append(waiting, p.target)
			}
			msg += fmt.Sprintf("; %d Clusters not provisioned yet: %s", len(waiting), targetNames(waiting))
		}
		return msg
	}
	msg := fmt.Sprintf("rollout of %s: %d of %d waves done", run.revision, run.done, len(run.waves))
	if run.pause > 0 {
		msg += fmt.Sprintf(", next wave in %s", run.pause.Round(time.Second))
	}
	return msg
}
