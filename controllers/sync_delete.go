package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/apply"
)

// addFinalizer puts uprev's finalizer on obj before anything else is done,
// and tells whether it had to: the patch triggers the next reconcile.
func addFinalizer(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	if controllerutil.ContainsFinalizer(obj, uprevv1.Finalizer) {
		return false, nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	controllerutil.AddFinalizer(obj, uprevv1.Finalizer)
	if err := c.Patch(ctx, obj, patch); err != nil {
		return false, fmt.Errorf("adding finalizer: %w", err)
	}
	return true, nil
}

// removeFinalizer lets the API server delete obj.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	if !controllerutil.RemoveFinalizer(obj, uprevv1.Finalizer) {
		return nil
	}
	if err := c.Patch(ctx, obj, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing finalizer: %w", err))
	}
	return nil
}

// reconcileDelete cleans up after a deleted Sync. With prune on and not
// suspended, every target's inventory is deleted (CRDs and Namespaces only
// when annotated, as for pruning); otherwise the objects are orphaned.
// Deletion is retried with backoff until the Sync's timeout has passed
// since it was deleted; then a target still failing is given up on with a
// Warning event, so an unreachable cluster never blocks deletion forever.
func (r *SyncReconciler) reconcileDelete(ctx context.Context, s *uprevv1.Sync) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	defer r.appliers.forget(client.ObjectKeyFromObject(s))
	if !controllerutil.ContainsFinalizer(s, uprevv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	if s.Spec.Suspend || !s.Spec.Prune {
		log.Info("Sync deleted; its objects are left in place", "prune", s.Spec.Prune, "suspended", s.Spec.Suspend)
		return ctrl.Result{}, removeFinalizer(ctx, r.Client, s)
	}
	var errs []error
	for _, target := range s.Spec.Targets {
		inventory := previousInventory(s, target.Name)
		if len(inventory) == 0 {
			continue
		}
		if err := r.deleteFromTarget(ctx, s, target, inventory); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", target.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		if r.Clock.Since(s.DeletionTimestamp.Time) < s.GetTimeout() {
			return ctrl.Result{}, fmt.Errorf("deleting the objects of Sync %s/%s: %w", s.Namespace, s.Name, err)
		}
		r.Events.Eventf(s, nil, corev1.EventTypeWarning, "DeletionGivenUp", "Delete",
			"objects left in place after %s of retries: %s", s.GetTimeout(), err)
	}
	return ctrl.Result{}, removeFinalizer(ctx, r.Client, s)
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
