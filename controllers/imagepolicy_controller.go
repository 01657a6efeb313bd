package controllers

// +kubebuilder:rbac:groups=image.toolkit.fluxcd.io,resources=imagepolicies,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=image.toolkit.fluxcd.io,resources=imagepolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

import (
	"context"
	"errors"
	"fmt"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	aclapi "github.com/fluxcd/pkg/apis/acl"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/cache"
	"github.com/fluxcd/pkg/runtime/acl"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/predicates"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/signature"
)

// Reasons of ImagePolicy conditions beyond Flux's own.
const (
	invalidPolicyReason = "InvalidPolicy"
	noMatchReason       = "NoMatchingTag"
)

// errRepositoryNotFound: a policy's ImageRepository does not exist (yet).
var errRepositoryNotFound = errors.New("not found")

// imageRepositoryRefIndex indexes ImagePolicies by `<namespace>/<name>` of
// their ImageRepository.
const imageRepositoryRefIndex = ".spec.imageRepositoryRef"

// ImagePolicyReconciler selects the latest tag of each ImagePolicy's
// repository.
type ImagePolicyReconciler struct {
	reconciler
	// Scanner reaches registries for digest lookups.
	Scanner *registry.Scanner
	// TokenCache keeps cloud registry tokens (spec.provider aws, azure,
	// gcp) until shortly before they expire; nil fetches one every time.
	TokenCache *cache.TokenCache
	// DefaultServiceAccount is the cloud identity of repositories without
	// serviceAccountName (--default-service-account; see cloudIdentity).
	DefaultServiceAccount string
	// Tags is the store the ImageRepositoryReconciler writes.
	Tags registry.Store
	// Clock tells the time for release gates; the wall clock when nil.
	Clock clock.PassiveClock
	// Verifier verifies signatures for ReleaseGates with spec.verify and
	// keeps its verdicts; one with the defaults when nil.
	Verifier *signature.Verifier
	// NoCrossNamespaceRefs refuses an ImageRepository in another
	// namespace, whatever its accessFrom says (Flux's
	// --no-cross-namespace-refs).
	NoCrossNamespaceRefs bool
	// shares bounds the workers one registry or namespace holds.
	shares *workerShares
	// waits lets a new policy wait quietly.
	waits quietWaits
	// tagWaits lets a policy wait quietly for this manager to store its
	// repository's tags (waitForTags).
	tagWaits quietWaits
	// digests spares age-gated policies digest look-ups between scans.
	digests digestCache
	// liveGates reads ReleaseGates past the cache (ungatedForSure).
	liveGates client.Reader
}

// SetupWithManager registers the reconciler; opts sets its concurrency.
func (r *ImagePolicyReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	r.Client = mgr.GetClient()
	r.liveGates = mgr.GetAPIReader()
	r.Events = mgr.GetEventRecorder("uprev-image-policy")
	r.shares = newWorkerShares(opts.MaxConcurrentReconciles)
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Verifier == nil {
		v, err := signature.NewVerifier(signature.Options{Clock: r.Clock})
		if err != nil {
			return fmt.Errorf("creating the signature verifier: %w", err)
		}
		r.Verifier = v
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &imagev1.ImagePolicy{}, imageRepositoryRefIndex,
		func(obj client.Object) []string {
			pol := obj.(*imagev1.ImagePolicy)
			return []string{repositoryOf(pol).String()}
		}); err != nil {
		return fmt.Errorf("indexing image policies: %w", err)
	}
	if err := indexPromotionSyncs(ctx, mgr); err != nil {
		return err
	}
	// Labels decide which ReleaseGates select a policy: a change selects again.
	return ctrl.NewControllerManagedBy(mgr).
		For(&imagev1.ImagePolicy{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&imagev1.ImageRepository{},
			handler.EnqueueRequestsFromMapFunc(r.policiesOfRepository),
			builder.WithPredicates(predicate.Or[client.Object](scanChangedPredicate{}, firstScanPredicate{}))).
		// A scan that finds the same tags: age-gated policies check that
		// their selected tag did not move, and policies waiting for the
		// tags to be stored select.
		Watches(&imagev1.ImageRepository{},
			handler.EnqueueRequestsFromMapFunc(r.rescannedPoliciesOfRepository),
			builder.WithPredicates(rescannedPredicate{})).
		Watches(&uprevv1.ReleaseGate{}, handler.EnqueueRequestsFromMapFunc(r.policiesOfGate),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&uprevv1.Sync{}, handler.EnqueueRequestsFromMapFunc(r.policiesOfSync),
			builder.WithPredicates(promotionChangedPredicate{})).
		WatchesRawSource(r.shares.Woken()).
		WithOptions(opts).
		Complete(r)
}

// policiesOfRepository maps an ImageRepository to the policies using it.
func (r *ImagePolicyReconciler) policiesOfRepository(ctx context.Context, obj client.Object) []reconcile.Request {
	policies, err := r.policiesUsing(ctx, obj)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing image policies of a repository")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(policies))
	for _, p := range policies {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return reqs
}

// policiesUsing returns the policies of the ImageRepository repo.
func (r *ImagePolicyReconciler) policiesUsing(ctx context.Context, repo client.Object) ([]imagev1.ImagePolicy, error) {
	var list imagev1.ImagePolicyList
	key := types.NamespacedName{Namespace: repo.GetNamespace(), Name: repo.GetName()}.String()
	if err := r.List(ctx, &list, client.MatchingFields{imageRepositoryRefIndex: key}); err != nil {
		return nil, fmt.Errorf("listing image policies of ImageRepository %s: %w", key, err)
	}
	return list.Items, nil
}

// repositoryOf returns the key of a policy's ImageRepository.
func repositoryOf(pol *imagev1.ImagePolicy) types.NamespacedName {
	ns := pol.Spec.ImageRepositoryRef.Namespace
	if ns == "" {
		ns = pol.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: pol.Spec.ImageRepositoryRef.Name}
}

// Reconcile selects the latest tag of one ImagePolicy.
func (r *ImagePolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pol := &imagev1.ImagePolicy{}
	if err := r.Get(ctx, req.NamespacedName, pol); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetObject(pol, req.NamespacedName)
			r.digests.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Flux's image-reflector-controller puts its finalizer on every
	// ImagePolicy it reconciled; uprev keeps nothing a finalizer guards,
	// and releases it so that the object goes once deleted.
	if !pol.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, removeFinalizer(ctx, r.Client, pol, imagev1.ImageFinalizer)
	}
	st := statusFields{&pol.Status.ObservedGeneration, &pol.Status.ReconcileRequestStatus}
	return r.run(ctx, pol, st, pol.Spec.Suspend, func(ctx context.Context, _ progressFunc) outcome {
		return r.reconcile(ctx, pol)
	})
}

// reconcile selects the latest tag and reflects its digest. On any failure
// the last good latestRef stays.
func (r *ImagePolicyReconciler) reconcile(ctx context.Context, pol *imagev1.ImagePolicy) outcome {
	repo, err := r.repository(ctx, pol)
	if errors.Is(err, errRepositoryNotFound) {
		// A new policy's repository is created in a moment, and
		// triggers the policy then.
		err = r.waits.wait(pol, r.Clock.Now(), err)
	}
	if err != nil {
		return outcome{err: err}
	}
	sel, err := r.selectLatest(ctx, pol, repo)
	if err != nil {
		return outcome{err: err}
	}
	if sel.Tag == "" {
		var o outcome
		if ref := pol.Status.LatestRef; ref != nil {
			o.message = fmt.Sprintf("Latest image tag for %s stays %s: no version passes the release gates now", ref.Name, ref.Tag)
		}
		return gatedOutcome(o, sel, r.Clock.Now())
	}
	tag := sel.Tag

	latest := &imagev1.ImageRef{Name: repo.Spec.Image, Tag: tag}
	switch {
	case sel.Digest != "" && pol.GetDigestReflectionPolicy() != imagev1.ReflectNever:
		// The digest the gates checked (its signature verified, its
		// age counted), not a second look-up the tag may have moved
		// away from since.
		latest.Digest = sel.Digest
	default:
		if latest.Digest, err = r.reflectDigest(ctx, pol, repo, tag); err != nil {
			return outcome{err: err}
		}
	}
	if hold, held := sel.DigestHold(latest.Digest); held {
		return outcome{err: degraded(uprevv1.ReleaseGatedReason, fmt.Errorf("%s; latestRef stays as it was", waitText(tag, hold)))}
	}
	r.recordLatest(pol, latest)

	o := outcome{message: fmt.Sprintf("Latest image tag for %s resolved to %s", latest.Name, latest.Tag)}
	if latest.Digest != "" {
		o.message += " with digest " + latest.Digest
	}
	if pol.GetDigestReflectionPolicy() == imagev1.ReflectAlways {
		o.requeueAfter = pol.GetInterval()
	}
	return gatedOutcome(o, sel, r.Clock.Now())
}

// repository returns the policy's ImageRepository once it is readable,
// allowed, and scanned. A missing or unscanned repository is waited for,
// not retried: its creation and its scans trigger the policy.
func (r *ImagePolicyReconciler) repository(ctx context.Context, pol *imagev1.ImagePolicy) (*imagev1.ImageRepository, error) {
	repo, err := allowedRepository(ctx, r.Client, pol, r.NoCrossNamespaceRefs)
	if err != nil {
		return nil, err
	}
	if repo.Status.LastScanResult == nil {
		return nil, firstScanWait(pol, repo)
	}
	return repo, nil
}

// firstScanWait is the error of a policy whose repository has not been
// scanned yet. A new policy (no Ready condition) whose repository is on its
// way to its first scan waits without a word and without a timer: the
// repository is in this manager's cache, so this manager scans it, and the
// scan, or the repository's report of a failure or of a long wait, runs
// the policy again (firstScanPredicate). Writing the wait would double
// what a new ImageRepository and its ImagePolicy cost the API server. A
// suspended or failing repository, or a policy that was reconciled before,
// shows why it waits, in the repository's words.
func firstScanWait(pol *imagev1.ImagePolicy, repo *imagev1.ImageRepository) error {
	key := repositoryOf(pol)
	err := fmt.Errorf("ImageRepository %s has not been scanned yet", key)
	ready := conditions.Get(repo, meta.ReadyCondition)
	switch {
	case repo.Spec.Suspend:
		err = fmt.Errorf("ImageRepository %s is suspended and has not been scanned yet", key)
	case ready != nil && ready.Status == metav1.ConditionFalse:
		err = fmt.Errorf("%w: %s", err, ready.Message)
	case conditions.Get(pol, meta.ReadyCondition) == nil:
		return &silentRetryError{err: err}
	}
	return degraded(meta.DependencyNotReadyReason, err)
}

// allowedRepository returns a policy's ImageRepository if the policy may
// use it: the same namespace, or another one when noCrossNamespaceRefs is
// off and the repository's accessFrom allows the policy's namespace. Every
// use of a repository's credentials on behalf of a policy goes through it.
func allowedRepository(ctx context.Context, c client.Client, pol *imagev1.ImagePolicy, noCrossNamespaceRefs bool) (*imagev1.ImageRepository, error) {
	key := repositoryOf(pol)
	if noCrossNamespaceRefs && key.Namespace != pol.Namespace {
		return nil, stalledf(aclapi.AccessDeniedReason,
			"cannot use ImageRepository %s from namespace %s: references across namespaces are turned off (--no-cross-namespace-refs)", key, pol.Namespace)
	}
	repo := &imagev1.ImageRepository{}
	if err := c.Get(ctx, key, repo); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, degraded(meta.DependencyNotReadyReason, fmt.Errorf("ImageRepository %s %w", key, errRepositoryNotFound))
		}
		return nil, fmt.Errorf("reading ImageRepository %s: %w", key, err)
	}
	if err := acl.NewAuthorization(c).HasAccessToRef(ctx, pol, key, repo.Spec.AccessFrom); err != nil {
		if acl.IsAccessDenied(err) {
			return nil, stalled(aclapi.AccessDeniedReason, err)
		}
		return nil, fmt.Errorf("checking access to ImageRepository %s: %w", key, err)
	}
	return repo, nil
}

// reflectDigest returns the digest to report for tag by the policy's
// digestReflectionPolicy; it looks one up only when the policy needs it.
func (r *ImagePolicyReconciler) reflectDigest(ctx context.Context, pol *imagev1.ImagePolicy, repo *imagev1.ImageRepository, tag string) (string, error) {
	prev := pol.Status.LatestRef
	switch pol.GetDigestReflectionPolicy() {
	case imagev1.ReflectNever:
		return "", nil
	case imagev1.ReflectIfNotPresent:
		if prev != nil && prev.Name == repo.Spec.Image && prev.Tag == tag && prev.Digest != "" {
			return prev.Digest, nil
		}
	}
	reg, release, err := r.registryFor(ctx, pol, repo, "look up the digest")
	if err != nil {
		return "", err
	}
	defer release()
	digest, err := reg.Digest(ctx, repo.Spec.Image, tag)
	if err != nil {
		return "", registryError(err)
	}
	return digest, nil
}

// registryFor returns the client of repo's registry for work of pol (what,
// for the message of a wait), holding a share of the policy workers until
// release is called.
func (r *ImagePolicyReconciler) registryFor(ctx context.Context, pol *imagev1.ImagePolicy, repo *imagev1.ImageRepository, what string) (*registry.Client, func(), error) {
	now := r.Clock.Now()
	release, busy, ok := r.shares.tryAcquire(now, client.ObjectKeyFromObject(pol), registryShareKey(repo), namespaceShareKey(pol.Namespace))
	if !ok {
		return nil, nil, r.waits.busyError(pol, now, what, busy)
	}
	reg, err := registryClient(ctx, r.Client, r.Scanner, repo, cloudIdentity{Tokens: r.TokenCache, DefaultServiceAccount: r.DefaultServiceAccount})
	if err != nil {
		release()
		return nil, nil, err
	}
	return reg, release, nil
}

// recordLatest sets latestRef, keeping the previous one and recording an
// event when it changed.
func (r *ImagePolicyReconciler) recordLatest(pol *imagev1.ImagePolicy, latest *imagev1.ImageRef) {
	prev := pol.Status.LatestRef
	if prev != nil && *prev == *latest {
		return
	}
	if prev != nil {
		pol.Status.ObservedPreviousRef = prev.DeepCopy()
		r.Events.Eventf(pol, nil, corev1.EventTypeNormal, "LatestImageChanged", "Select",
			"Latest image for %s updated from %s to %s", latest.Name, prev.String(), latest.String())
	}
	pol.Status.LatestRef = latest
}
