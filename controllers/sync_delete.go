package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/apply"
)

// reconcileDelete cleans up after a deleted Sync. With prune on and not
// suspended, every target's inventory, as its record holds it, is deleted
// (CRDs and Namespaces only when annotated, as for pruning), up to
// defaultMaxConcurrent targets at once; otherwise the objects are
// orphaned. Deletion is retried with backoff until the Sync's timeout has
// passed since it was deleted; then a target still failing is given up on
// with a Warning event, so an unreachable cluster never blocks deletion
// forever. The targets' records (SyncTargets) go last.
func (r *SyncReconciler) reconcileDelete(ctx context.Context, s *uprevv1.Sync) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	defer r.forget(client.ObjectKeyFromObject(s))
	if !controllerutil.ContainsFinalizer(s, uprevv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	if s.Spec.Suspend || !s.Spec.Prune {
		log.Info("Sync deleted; its objects are left in place", "prune", s.Spec.Prune, "suspended", s.Spec.Suspend)
	} else if err := r.deleteFromTargets(ctx, s); err != nil {
		if r.Clock.Since(s.DeletionTimestamp.Time) < s.GetTimeout() {
			return ctrl.Result{}, fmt.Errorf("deleting the objects of Sync %s/%s: %w", s.Namespace, s.Name, err)
		}
		r.Events.Eventf(s, nil, corev1.EventTypeWarning, "DeletionGivenUp", "Delete",
			"objects left in place after %s of retries: %s", s.GetTimeout(), err)
	}
	if err := r.deleteRecords(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, removeFinalizer(ctx, r.Client, s, uprevv1.Finalizer)
}

// deleteFromTargets deletes the inventory of every target that has a
// record, and returns the errors of those it could not, the first few by
// name.
func (r *SyncReconciler) deleteFromTargets(ctx context.Context, s *uprevv1.Sync) error {
	records, err := r.loadRecords(ctx, s)
	if err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(records))
	errs := make([]error, len(names))
	slots := make(chan struct{}, defaultMaxConcurrent)
	var wg sync.WaitGroup
	for i, name := range names {
		rec := records[name]
		if len(rec.obj.Status.Inventory) == 0 {
			continue
		}
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := r.deleteFromTarget(ctx, s, rec.target(), rec.inventory()); err != nil {
				errs[i] = fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	wg.Wait()
	return targetErrors(slices.DeleteFunc(errs, func(err error) bool { return err == nil }))
}

// forget drops what the reconciler keeps for a deleted Sync: its targets'
// Appliers, its claim on the kept clone and its component metrics.
func (r *SyncReconciler) forget(key types.NamespacedName) {
	r.appliers.forget(key)
	r.ComponentInfo.Forget(key)
	r.Clones.Release(objectID("Sync", key))
}

// deleteFromTarget deletes what a target's inventory holds, as the Sync's
// apply identity, and records an event of what was deleted.
func (r *SyncReconciler) deleteFromTarget(ctx context.Context, s *uprevv1.Sync, target uprevv1.Target, inventory []apply.Entry) error {
	applier, err := r.applier(ctx, s, target)
	if err != nil {
		return err
	}
	res, err := applier.Delete(ctx, inventory, r.applyOptions(s, target))
	if res.Changed() {
		r.Events.Eventf(s, nil, corev1.EventTypeNormal, "Deleted", "Delete", "from %s: %s", target.Name, changeSummary(res))
	}
	return err
}
