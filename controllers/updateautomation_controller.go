package controllers

// +kubebuilder:rbac:groups=uprev.dev,resources=updateautomations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=uprev.dev,resources=updateautomations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=image.toolkit.fluxcd.io,resources=imagepolicies,verbs=get;list;watch

import (
	"context"
	"net/http"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/cache"
	"github.com/fluxcd/pkg/runtime/predicates"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/source"
	"github.com/uprev-dev/uprev/internal/update"
)

// pushedReason is the reason of the event that announces a push.
const pushedReason = "Pushed"

// UpdateAutomationReconciler writes the versions ImagePolicies select into
// Git.
type UpdateAutomationReconciler struct {
	reconciler
	// Clones keeps the clones of each repository, shared by all
	// automations and Syncs.
	Clones *gitrepo.Cache
	// Scanner reads the release artifacts that ship CRD bundles.
	Scanner *registry.Scanner
	// TokenCache keeps short-lived tokens while they are fresh: cloud
	// registry tokens for those artifacts and GitHub App installation
	// tokens for Git; nil fetches one every time.
	TokenCache *cache.TokenCache
	// Forges makes the calls to forges' APIs for pull requests: the
	// outbound layer's client (outbound.Denylist.Client), with the deny
	// list and a deadline.
	Forges *http.Client
	// Notes finds the release notes of pull requests' updates; nil leaves
	// them out.
	Notes *notes.Fetcher
	// GitHubReleases is the API that serves the releases of sources on
	// github.com (notes.GitHubAPI, unless Options say otherwise).
	GitHubReleases notes.API
	// Sources reads the Helm repository indexes and JSON documents of
	// ReleaseSources for the notes of their updates, with each source's
	// credentials, as their scans do.
	Sources *source.Client
	// Tags is the tag store the image scans write, read for the time a
	// version was first seen; nil leaves it out of pull requests.
	Tags *registry.Store
	// DefaultServiceAccount is the cloud identity of CRD-bundle pulls from
	// repositories without serviceAccountName (see cloudIdentity).
	DefaultServiceAccount string
	// NoCrossNamespaceRefs refuses CRD-bundle pulls with an ImageRepository
	// of another namespace (Flux's --no-cross-namespace-refs).
	NoCrossNamespaceRefs bool
	// MaxCRDLayerSize bounds an artifact layer read for CRDs; 0 means the
	// crds package's default.
	MaxCRDLayerSize int64
	// pushes, when set, hears of every push, for the Syncs of the branch.
	pushes *gitPushEvents
	// gitShares bounds the workers one Git server and one namespace hold in
	// the Git work of UpdateAutomations (takeGitShare); nil bounds nothing.
	gitShares *workerShares
	// Clock tells when a run takes its Git share; the wall clock when nil.
	Clock clock.PassiveClock
	// bundles holds, per spec.crds entry of each automation, the last
	// bundle read, within the bounds of crdBundleCache.
	bundles *crdBundleCache
	// Scans keeps what runs found in the marked files' contents, so that a
	// run parses only the files that changed since (update.ScanCache); nil
	// parses every marked file each run.
	Scans *update.ScanCache
}

// SetupWithManager registers the reconciler; opts sets its concurrency.
func (r *UpdateAutomationReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.Client = mgr.GetClient()
	r.Events = mgr.GetEventRecorder("uprev-update-automation")
	bundles, err := newCRDBundleCache()
	if err != nil {
		return err
	}
	r.bundles = bundles
	r.gitShares = newWorkerShares(opts.MaxConcurrentReconciles)
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&uprevv1.UpdateAutomation{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))).
		Watches(&imagev1.ImagePolicy{},
			handler.EnqueueRequestsFromMapFunc(r.automationsOfPolicy),
			builder.WithPredicates(latestRefChangedPredicate{})).
		Watches(&uprevv1.ReleaseSource{},
			handler.EnqueueRequestsFromMapFunc(r.automationsOfPolicy),
			builder.WithPredicates(latestVersionChangedPredicate{})).
		WatchesRawSource(r.gitShares.Woken()).
		WithOptions(opts).
		Complete(r)
}

// automationsOfPolicy maps an ImagePolicy to the automations of its
// namespace that select it.
func (r *UpdateAutomationReconciler) automationsOfPolicy(ctx context.Context, obj client.Object) []reconcile.Request {
	var list uprevv1.UpdateAutomationList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing update automations of a policy")
		return nil
	}
	return requestsFor(list.Items, func(a *uprevv1.UpdateAutomation) bool {
		return selects(a.Spec.PolicySelector, obj)
	})
}

// selects tells whether a policy selector (nil: all) matches the labels of
// policy; an invalid selector matches none.
func selects(sel *metav1.LabelSelector, policy client.Object) bool {
	s, err := selectorOrEverything(sel)
	return err == nil && s.Matches(labels.Set(policy.GetLabels()))
}

// requestsFor returns a reconcile request for each of items that wants
// says is concerned.
func requestsFor[T any, P interface {
	*T
	client.Object
}](items []T, wants func(P) bool) []reconcile.Request {
	var reqs []reconcile.Request
	for i := range items {
		if obj := P(&items[i]); wants(obj) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		}
	}
	return reqs
}

// policySelector returns the automation's label selector over policies.
func policySelector(auto *uprevv1.UpdateAutomation) (labels.Selector, error) {
	return selectorOrEverything(auto.Spec.PolicySelector)
}

// selectorOrEverything returns sel as a selector; nil selects everything.
func selectorOrEverything(sel *metav1.LabelSelector) (labels.Selector, error) {
	if sel == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(sel)
}

// Reconcile runs one UpdateAutomation.
func (r *UpdateAutomationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	auto := &uprevv1.UpdateAutomation{}
	if err := r.Get(ctx, req.NamespacedName, auto); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetObject(auto, req.NamespacedName)
			r.forget(uprevv1.UpdateAutomationKind, req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !auto.DeletionTimestamp.IsZero() {
		r.forget(uprevv1.UpdateAutomationKind, req.NamespacedName)
		return ctrl.Result{}, removeFinalizer(ctx, r.Client, auto, uprevv1.Finalizer)
	}
	if err := addFinalizer(ctx, r.Client, auto, uprevv1.Finalizer); err != nil {
		return ctrl.Result{}, err
	}
	st := statusFields{&auto.Status.ObservedGeneration, &auto.Status.ReconcileRequestStatus}
	return r.run(ctx, auto, st, auto.Spec.Suspend, func(ctx context.Context, progress progressFunc) outcome {
		front := automationFront{kind: uprevv1.UpdateAutomationKind, object: auto, gitSecretNamespace: auto.Namespace, gitShares: r.gitShares}
		run := &automationRun{auto: auto, front: front, progress: progress}
		err := r.reconcile(ctx, run)
		return outcome{err: err, message: run.summary(), requeueAfter: auto.Spec.Interval.Duration}
	})
}

// forget drops what the reconciler keeps for a deleted automation of kind:
// its claim on the kept clone, which is then removed once no one else uses
// it, and its CRD bundles.
func (r *UpdateAutomationReconciler) forget(kind string, key types.NamespacedName) {
	r.Clones.Release(objectID(kind, key))
	r.bundles.forget(objectID(kind, key) + " crds[")
}
