package controllers

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/apply"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/kubeconfig"
)

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
	key := client.ObjectKeyFromObject(run.sync)
	session, revision, err := r.Clones.OpenRevision(openClone(ctx, r.gitShares, key), remote, ref, objectID("Sync", key))
	if busy := cloneBusy(err); busy != nil {
		release(busy)
		return busy
	}
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
// credentials. Appliers of one API server share its REST mapping
// (apply.Shared), whatever their credentials.
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
	a, err := r.appliers.put(syncKey, target.Name, key, conn, func() (*apply.Applier, error) { return r.shared.NewApplier(config) })
	if err != nil {
		return nil, fmt.Errorf("connecting to target %s: %w", target.Name, err)
	}
	return a, nil
}
