package controllers

// +kubebuilder:rbac:groups=image.toolkit.fluxcd.io,resources=imagerepositories,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=image.toolkit.fluxcd.io,resources=imagerepositories/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets;serviceaccounts,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/cache"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/predicates"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/uprev-dev/uprev/internal/registry"
)

// invalidExclusionListReason: an exclusion pattern is not a valid regular expression.
const invalidExclusionListReason = "InvalidExclusionList"

// latestTagsShown is how many tags status.lastScanResult.latestTags lists.
const latestTagsShown = 10

// ImageRepositoryReconciler scans registries for the tags of ImageRepositories.
type ImageRepositoryReconciler struct {
	reconciler
	// Scanner reaches registries with shared limits, retries and metrics.
	Scanner *registry.Scanner
	// TokenCache keeps cloud registry tokens (spec.provider aws, azure,
	// gcp) until shortly before they expire; nil fetches one every time.
	TokenCache *cache.TokenCache
	// DefaultServiceAccount is the cloud identity of repositories without
	// serviceAccountName (--default-service-account; see cloudIdentity).
	DefaultServiceAccount string
	// Tags keeps the tags of every repository across restarts.
	Tags registry.Store
	// Clock tells the time; the wall clock when nil.
	Clock clock.PassiveClock
	// TagCount, when set, is the tags-per-repository gauge.
	TagCount *prometheus.GaugeVec
	// shares bounds the workers one registry or namespace holds.
	shares *workerShares
	// waits lets a new repository wait quietly.
	waits quietWaits
}

// NewTagCountMetric returns the tags-per-repository gauge.
func NewTagCountMetric() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uprev_image_repository_tags",
		Help: "Number of tags found by the last scan of an ImageRepository.",
	}, []string{"namespace", "name"})
}

// SetupWithManager registers the reconciler; opts sets its concurrency.
func (r *ImageRepositoryReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.Client = mgr.GetClient()
	r.Events = mgr.GetEventRecorder("uprev-image-repository")
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.shares = newWorkerShares(opts.MaxConcurrentReconciles)
	return ctrl.NewControllerManagedBy(mgr).
		For(&imagev1.ImageRepository{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))).
		WatchesRawSource(r.shares.Woken()).
		WithOptions(opts).
		Complete(r)
}

// Reconcile scans one ImageRepository when it is due.
func (r *ImageRepositoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	repo := &imagev1.ImageRepository{}
	if err := r.Get(ctx, req.NamespacedName, repo); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetObject(repo, req.NamespacedName)
			return ctrl.Result{}, r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	// Flux's image-reflector-controller puts its finalizer on every
	// ImageRepository it reconciled; uprev keeps nothing a finalizer
	// guards, and releases it so that the object goes once deleted.
	if !repo.DeletionTimestamp.IsZero() {
		if err := r.forget(req.NamespacedName); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, removeFinalizer(ctx, r.Client, repo, imagev1.ImageFinalizer)
	}
	st := statusFields{&repo.Status.ObservedGeneration, &repo.Status.ReconcileRequestStatus}
	return r.run(ctx, repo, st, repo.Spec.Suspend, func(ctx context.Context, _ progressFunc) outcome {
		return r.reconcile(ctx, repo)
	})
}

// forget drops the stored tags, the metric and the token cache events of a
// deleted repository.
func (r *ImageRepositoryReconciler) forget(key types.NamespacedName) error {
	if r.TagCount != nil {
		r.TagCount.DeleteLabelValues(key.Namespace, key.Name)
	}
	r.TokenCache.DeleteEventsForObject(imagev1.ImageRepositoryKind, key.Name, key.Namespace, cache.OperationReconcile)
	return r.Tags.Delete(key.String())
}

// reconcile scans the repository when due and records the result.
func (r *ImageRepositoryReconciler) reconcile(ctx context.Context, repo *imagev1.ImageRepository) outcome {
	if repo.Spec.Interval.Duration <= 0 {
		return outcome{err: stalledf(imagev1.IntervalNotConfiguredReason, "spec.interval must be set")}
	}
	canonical, err := registry.CanonicalName(repo.Spec.Image)
	if err != nil {
		return outcome{err: stalled(imagev1.ImageURLInvalidReason, err)}
	}
	exclusions := repo.GetExclusionList()

	now := r.Clock.Now()
	if wait := r.nextScanIn(repo, canonical, exclusions, now); wait > 0 {
		return outcome{message: scanMessage(repo.Status.LastScanResult), requeueAfter: wait}
	}

	release, busy, ok := r.shares.tryAcquire(now, client.ObjectKeyFromObject(repo), scanShareKeys(repo)...)
	if !ok {
		return r.waitForShare(repo, now, busy)
	}
	tags, err := r.scan(ctx, repo, exclusions)
	release()
	if err != nil {
		return outcome{err: err}
	}
	repo.Status.CanonicalImageName = canonical
	repo.Status.ObservedExclusionList = exclusions
	repo.Status.LastScanResult = &imagev1.ScanResult{
		Revision:   tagsRevision(tags),
		TagCount:   len(tags),
		ScanTime:   metav1.NewTime(now),
		LatestTags: latestTags(tags),
	}
	if r.TagCount != nil {
		r.TagCount.WithLabelValues(repo.Namespace, repo.Name).Set(float64(len(tags)))
	}
	// A new repository's first scan is announced by the selections of its
	// policies, one event each: one of its own would double the events,
	// and the API requests, of every new ImageRepository and ImagePolicy.
	// Its failures and recoveries are announced.
	return outcome{message: scanMessage(repo.Status.LastScanResult), requeueAfter: repo.Spec.Interval.Duration, unannounced: true}
}

// nextScanIn returns how long until the repository is due for a scan; 0
// means now. A scan is due when none was made, the image or exclusion list
// changed, a reconcile was requested, or the interval passed.
func (r *ImageRepositoryReconciler) nextScanIn(repo *imagev1.ImageRepository, canonical string, exclusions []string, now time.Time) time.Duration {
	last := repo.Status.LastScanResult
	if last == nil || repo.Status.CanonicalImageName != canonical ||
		!slices.Equal(repo.Status.ObservedExclusionList, exclusions) {
		return 0
	}
	if token, ok := meta.ReconcileAnnotationValue(repo.GetAnnotations()); ok && token != repo.Status.GetLastHandledReconcileRequest() {
		return 0
	}
	if _, err := r.Tags.Tags(repoKey(repo)); err != nil {
		return 0
	}
	return max(0, last.ScanTime.Add(repo.Spec.Interval.Duration).Sub(now))
}

// scan lists the tags, drops the excluded ones and stores the rest.
func (r *ImageRepositoryReconciler) scan(ctx context.Context, repo *imagev1.ImageRepository, exclusions []string) ([]string, error) {
	reg, err := registryClient(ctx, r.Client, r.Scanner, repo, cloudIdentity{Tokens: r.TokenCache, DefaultServiceAccount: r.DefaultServiceAccount})
	if err != nil {
		return nil, err
	}
	tags, err := reg.ListTags(ctx, repo.Spec.Image)
	if err != nil {
		return nil, registryError(err)
	}
	tags, err = registry.Exclude(tags, exclusions)
	if err != nil {
		return nil, stalled(invalidExclusionListReason, fmt.Errorf("spec.exclusionList: %w", err))
	}
	if err := r.Tags.SetTags(repoKey(repo), tags); err != nil {
		return nil, fmt.Errorf("storing tags: %w", err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Scanned repository", "tags", len(tags))
	return tags, nil
}

// scanShareKeys are the worker shares a scan of repo takes: its registry's
// and its namespace's.
func scanShareKeys(repo *imagev1.ImageRepository) []string {
	return []string{registryShareKey(repo), namespaceShareKey(repo.Namespace)}
}

// registryShareKey is the worker share of repo's registry: its host, with
// the proxy its requests go through (the Secret that names it).
func registryShareKey(repo *imagev1.ImageRepository) string {
	host, err := registry.RegistryHost(repo.Spec.Image)
	if err != nil {
		host = repo.Spec.Image
	}
	proxy := ""
	if ref := repo.Spec.ProxySecretRef; ref != nil {
		proxy = "Secret " + repo.Namespace + "/" + ref.Name
	}
	return hostShareKey("registry", host, proxy)
}

// namespaceShareKey is the worker share of namespace ns.
func namespaceShareKey(ns string) string {
	return "namespace " + ns
}

// waitForShare is the outcome of a scan put off because busy holds its
// share of the scan workers at now: a repository that was scanned and is
// Ready stays so, any other waits (see busyError). Either way a requested
// scan stays pending (outcome.putOff) until a run makes it.
func (r *ImageRepositoryReconciler) waitForShare(repo *imagev1.ImageRepository, now time.Time, busy busyShare) outcome {
	if repo.Status.LastScanResult != nil && conditions.IsReady(repo) {
		return outcome{message: scanMessage(repo.Status.LastScanResult), requeueAfter: busyRetry, deferred: true}
	}
	return outcome{err: r.waits.busyError(repo, now, "scan", busy)}
}

// tagListTooLargeReason: the registry's tag list is past the documented
// bounds on tags, bytes or pages.
const tagListTooLargeReason = "TagListTooLarge"

// registryError sorts a registry error into Stalled or retried, with a
// condition reason.
func registryError(err error) error {
	switch {
	case errors.Is(err, registry.ErrTagListTooLarge):
		return transient(tagListTooLargeReason, err)
	case errors.Is(err, registry.ErrInvalidConfig):
		return stalled(imagev1.ImageURLInvalidReason, err)
	case errors.Is(err, registry.ErrUnauthorized):
		return transient(imagev1.AuthenticationFailedReason, err)
	default:
		return transient(imagev1.ReadOperationFailedReason, err)
	}
}

// repoKey is the tag store key of a repository: namespace/name.
func repoKey(repo *imagev1.ImageRepository) string {
	return client.ObjectKeyFromObject(repo).String()
}

// tagsRevision is a checksum of the tag list, which changes when a tag is
// added or removed.
func tagsRevision(tags []string) string {
	sorted := slices.Sorted(slices.Values(tags))
	sum := sha256.Sum256([]byte(strings.Join(sorted, "\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// latestTags returns the first tags in descending order, as Flux lists them.
func latestTags(tags []string) []string {
	sorted := slices.Sorted(slices.Values(tags))
	slices.Reverse(sorted)
	return sorted[:min(len(sorted), latestTagsShown)]
}

// scanMessage is the Ready message after a scan.
func scanMessage(last *imagev1.ScanResult) string {
	if last == nil {
		return "no scan yet"
	}
	return fmt.Sprintf("successful scan: found %d tags", last.TagCount)
}
