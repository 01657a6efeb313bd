package controllers

// +kubebuilder:rbac:groups=image.toolkit.fluxcd.io,resources=imageupdateautomations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=image.toolkit.fluxcd.io,resources=imageupdateautomations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories,verbs=get;list;watch

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/predicates"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// ImageUpdateAutomationReconciler serves Flux's ImageUpdateAutomation
// (image.toolkit.fluxcd.io/v1) with the UpdateAutomation engine: each run
// reads the automation and the Flux GitRepository its sourceRef names as
// an UpdateAutomation (fluxAutomation), runs the same phases, and writes
// the outcome into Flux's status fields. Flux users so get revert holds,
// no downgrades, byte-preserving edits and kept clones without rewriting
// their objects. GitRepository is read, never served.
type ImageUpdateAutomationReconciler struct {
	reconciler
	// Engine runs the write-back; it is the UpdateAutomation reconciler of
	// the same manager.
	Engine *UpdateAutomationReconciler
	// sources reads GitRepositories: the manager's cache when the
	// GitRepository CRD was there as the manager started (and is
	// watched), else the apiserver, so that a missing CRD is an error on
	// the automation rather than a manager that does not start.
	sources client.Reader
	// NoCrossNamespaceRefs refuses a sourceRef to another namespace.
	NoCrossNamespaceRefs bool
	// gitShares bounds the workers one Git server and one namespace hold in
	// the Git work of ImageUpdateAutomations (takeGitShare).
	gitShares *workerShares
	// engineStatus keeps, per automation, what the engine records that
	// Flux's status has no field for (the push branch's tip, holds,
	// refused downgrades, the pull request). It lets a run with nothing
	// new skip the rewrite walk, and a pull request already up to date
	// go without a call; after a restart the first run makes a full walk
	// and one call.
	engineStatus sync.Map
}

// SetupWithManager registers the reconciler; opts sets its concurrency.
// When the GitRepository CRD is installed as the manager starts, a changed
// GitRepository spec runs the automations that read it at once, as in
// Flux; without it, they run at their interval and report the missing CRD.
func (r *ImageUpdateAutomationReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.Client = mgr.GetClient()
	r.sources = mgr.GetAPIReader()
	r.Events = mgr.GetEventRecorder("uprev-image-update-automation")
	r.gitShares = newWorkerShares(opts.MaxConcurrentReconciles)
	b := ctrl.NewControllerManagedBy(mgr).
		// Annotations too, so that releasing a hold (uprev.dev/release-holds)
		// takes effect at once, as on an UpdateAutomation; but not the holds
		// the reconciler publishes itself.
		For(&iacv1.ImageUpdateAutomation{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, annotationsChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))).
		Watches(&imagev1.ImagePolicy{},
			handler.EnqueueRequestsFromMapFunc(r.automationsOfPolicy),
			builder.WithPredicates(latestRefChangedPredicate{}))
	gitRepository := schema.GroupKind{Group: sourcev1.GroupVersion.Group, Kind: sourcev1.GitRepositoryKind}
	if _, err := mgr.GetRESTMapper().RESTMapping(gitRepository, sourcev1.GroupVersion.Version); err == nil {
		b = b.Watches(&sourcev1.GitRepository{},
			handler.EnqueueRequestsFromMapFunc(r.automationsOfSource),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
		r.sources = r.Client
	}
	return b.WatchesRawSource(r.gitShares.Woken()).WithOptions(opts).Complete(r)
}

// automationsOfSource maps a GitRepository to the automations whose
// sourceRef names it.
func (r *ImageUpdateAutomationReconciler) automationsOfSource(ctx context.Context, obj client.Object) []reconcile.Request {
	var list iacv1.ImageUpdateAutomationList
	if err := r.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing image update automations of a GitRepository")
		return nil
	}
	return requestsFor(list.Items, func(a *iacv1.ImageUpdateAutomation) bool {
		ref := a.Spec.SourceRef
		return ref.Name == obj.GetName() && cmp.Or(ref.Namespace, a.Namespace) == obj.GetNamespace()
	})
}

// automationsOfPolicy maps an ImagePolicy to the automations of its
// namespace that select it.
func (r *ImageUpdateAutomationReconciler) automationsOfPolicy(ctx context.Context, obj client.Object) []reconcile.Request {
	var list iacv1.ImageUpdateAutomationList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing image update automations of a policy")
		return nil
	}
	return requestsFor(list.Items, func(a *iacv1.ImageUpdateAutomation) bool {
		return selects(a.Spec.PolicySelector, obj)
	})
}

// Reconcile runs one ImageUpdateAutomation.
func (r *ImageUpdateAutomationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &iacv1.ImageUpdateAutomation{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetObject(obj, req.NamespacedName)
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Flux's finalizer, so that objects Flux's controller reconciled
	// before are released by uprev, and the other way round.
	if !obj.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, removeFinalizer(ctx, r.Client, obj, iacv1.ImageUpdateAutomationFinalizer)
	}
	if err := addFinalizer(ctx, r.Client, obj, iacv1.ImageUpdateAutomationFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	st := statusFields{&obj.Status.ObservedGeneration, &obj.Status.ReconcileRequestStatus}
	return r.run(ctx, obj, st, obj.Spec.Suspend, func(ctx context.Context, progress progressFunc) outcome {
		start := metav1.Now()
		run, err := r.translate(ctx, obj)
		if err != nil {
			return outcome{err: err}
		}
		run.progress = progress
		run.front.statusChanged = func(st uprevv1.UpdateAutomationStatus) { obj.Status = fluxStatus(obj.Status, st) }
		err = r.Engine.reconcile(ctx, run)
		if err == nil {
			obj.Status.LastAutomationRunTime = &start
		}
		r.engineStatus.Store(req.NamespacedName, run.auto.Status)
		if run.rules != nil { // else the run stopped before it read them
			if err := r.publishHolds(ctx, obj, run.auto.Status.Holds, run.auto.Status.RefusedDowngrades); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Publishing holds")
			}
		}
		return outcome{err: err, message: run.summary(), requeueAfter: obj.Spec.Interval.Duration}
	})
}

// publishHolds writes holds, the holds in force, and refused, the
// downgrades the run refused, into obj's annotation
// uprevv1.HoldsAnnotation (the object's status has no field for them), or
// removes it when there are neither; it sends nothing when the annotation
// says so already. The merge patch names only that annotation, owned by
// the manager's field manager, so it leaves every other field (and their
// owners, such as a GitOps tool applying the object) alone; a patch that
// fails is logged by the caller and made again at the next run, the
// annotation then still differing.
func (r *ImageUpdateAutomationReconciler) publishHolds(ctx context.Context, obj *iacv1.ImageUpdateAutomation, holds []uprevv1.Hold, refused []uprevv1.RefusedDowngrade) error {
	value := uprevv1.EncodeHolds(holds, refused...)
	current, published := obj.Annotations[uprevv1.HoldsAnnotation]
	if value == current && (value != "" || !published) {
		return nil
	}
	var annotation any // null removes it
	if value != "" {
		annotation = value
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{uprevv1.HoldsAnnotation: annotation}}})
	if err != nil {
		return fmt.Errorf("encoding the holds patch: %w", err)
	}
	// A copy, so that the object as the run left it (its status to write)
	// is not replaced with the patch's answer.
	target := &iacv1.ImageUpdateAutomation{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name}}
	if err := r.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("writing annotation %s: %w", uprevv1.HoldsAnnotation, err)
	}
	return nil
}

// forget drops what is kept for a deleted automation.
func (r *ImageUpdateAutomationReconciler) forget(key types.NamespacedName) {
	r.engineStatus.Delete(key)
	r.Engine.forget(iacv1.ImageUpdateAutomationKind, key)
}

// fluxDefaultBranch is the branch Flux checks out when neither the
// automation nor the GitRepository names a ref (fluxcd/pkg/git's
// DefaultBranch).
const fluxDefaultBranch = "master"
