package controllers

// +kubebuilder:rbac:groups=uprev.dev,resources=releasesources,verbs=get;list;watch
// +kubebuilder:rbac:groups=uprev.dev,resources=releasesources/status,verbs=get;update;patch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	fluxcache "github.com/fluxcd/pkg/cache"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/predicates"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/policy"
	"github.com/uprev-dev/uprev/internal/source"
	"github.com/uprev-dev/uprev/internal/sourcekind"
)

// ReleaseSourceReconciler scans ReleaseSources and selects their latest
// version.
type ReleaseSourceReconciler struct {
	reconciler
	// Sources reads Helm repositories, release APIs and feeds, with the
	// manager's denied addresses and the conditional requests of earlier
	// scans.
	Sources *source.Client
	// Clock tells the time of scans; the wall clock when nil.
	Clock clock.PassiveClock
	// TokenCache keeps GitHub App installation tokens; nil fetches one
	// per scan.
	TokenCache *fluxcache.TokenCache
	// shares bounds the workers one source server and one namespace hold
	// (takeHostShare).
	shares *workerShares
}

// SetupWithManager registers the reconciler; opts sets its concurrency.
func (r *ReleaseSourceReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.Client = mgr.GetClient()
	r.Events = mgr.GetEventRecorder("uprev-release-source")
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.shares = newWorkerShares(opts.MaxConcurrentReconciles)
	return ctrl.NewControllerManagedBy(mgr).
		For(&uprevv1.ReleaseSource{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))).
		WatchesRawSource(r.shares.Woken()).
		WithOptions(opts).
		Complete(r)
}

// Reconcile scans one ReleaseSource when it is due.
func (r *ReleaseSourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rs := &uprevv1.ReleaseSource{}
	if err := r.Get(ctx, req.NamespacedName, rs); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.forgetObject(rs, req.NamespacedName)
			r.Sources.Forget(req.String())
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	st := statusFields{&rs.Status.ObservedGeneration, &rs.Status.ReconcileRequestStatus}
	return r.run(ctx, rs, st, rs.Spec.Suspend, func(ctx context.Context, progress progressFunc) outcome {
		return r.reconcile(ctx, rs, progress)
	})
}

// reconcile scans the source when due, selects a version and records it.
// On any failure the last good status.latest stays.
func (r *ReleaseSourceReconciler) reconcile(ctx context.Context, rs *uprevv1.ReleaseSource, progress progressFunc) outcome {
	kind, err := checkReleaseSource(rs)
	if err != nil {
		return outcome{err: err}
	}
	now := r.Clock.Now()
	if wait := sourceScanDueIn(rs, now); wait > 0 {
		return outcome{message: sourceMessage(rs, kind), requeueAfter: wait}
	}
	release, err := takeHostShare(r.shares, now, client.ObjectKeyFromObject(rs), hostShareKey("source server", urlHost(kind.URL()), ""), sourceShareReasons, isSourceTimeout)
	if err != nil {
		return outcome{err: err}
	}
	o := r.scanAndSelect(ctx, rs, kind, now, progress)
	release(o.err)
	return o
}

// isSourceTimeout tells a scan whose server gave no answer in time.
func isSourceTimeout(err error) bool {
	return errors.Is(err, source.ErrTimeout) || errors.Is(err, gitrepo.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// scanAndSelect scans the source, of kind, in the run's share of the
// workers of its server, selects a version and pins its assets.
func (r *ReleaseSourceReconciler) scanAndSelect(ctx context.Context, rs *uprevv1.ReleaseSource, kind sourcekind.Kind, now time.Time, progress progressFunc) outcome {
	interval := rs.Spec.Interval.Duration
	progress(ctx, "scanning %s", kind.Describe())
	access, err := sourceAccess(ctx, r.Client, r.TokenCache, rs, kind)
	if err != nil {
		return outcome{err: err}
	}
	listing, err := kind.List(ctx, r.Sources, client.ObjectKeyFromObject(rs).String(), access)
	if err != nil {
		return outcome{err: listError(err), requeueAfter: interval}
	}
	names := listing.Names()
	rs.Status.LastScan = &uprevv1.SourceScan{
		Time:           metav1.NewTime(now),
		VersionCount:   len(names),
		Revision:       tagsRevision(names),
		LatestVersions: latestTags(names),
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Scanned release source", "versions", len(names), "notModified", listing.NotModified)

	selected, err := source.Select(rs.Spec.Policy, rs.Spec.FilterTags, listing.Versions)
	switch {
	case errors.Is(err, policy.ErrInvalidPolicy):
		return outcome{err: stalled(uprevv1.InvalidPolicyReason, err)}
	case err != nil:
		return outcome{err: degraded(uprevv1.NoMatchingVersionReason,
			fmt.Errorf("selecting from %d versions of %s: %w", len(names), kind.Describe(), err)), requeueAfter: interval}
	}
	latest := &uprevv1.SourceVersion{Version: selected.Version, URL: selected.URL, Digest: selected.Digest}
	if latest.Assets, err = r.pinAssets(ctx, rs, kind, access, selected.Version, progress); err != nil {
		return outcome{err: err, requeueAfter: interval}
	}
	r.recordLatest(rs, kind, latest)
	return outcome{message: sourceMessage(rs, kind), requeueAfter: interval}
}

// pinAssets returns the pinned assets of version: those of status.latest
// when it is the same version with the same asset URLs (each version is
// downloaded once), else downloaded and hashed now. A version whose assets
// cannot be pinned is refused, the last selection kept.
func (r *ReleaseSourceReconciler) pinAssets(ctx context.Context, rs *uprevv1.ReleaseSource, kind sourcekind.Kind, access source.Access, version string, progress progressFunc) ([]uprevv1.PinnedAsset, error) {
	if len(rs.Spec.Assets) == 0 {
		return nil, nil
	}
	specs := make([]source.AssetSpec, len(rs.Spec.Assets))
	for i, a := range rs.Spec.Assets {
		specs[i] = source.AssetSpec{Name: a.Name, URL: a.URL}
		if a.Checksum != nil {
			specs[i].ChecksumURL = a.Checksum.URL
		}
	}
	if prev := rs.Status.Latest; prev != nil && prev.Version == version && assetsPinnedFor(prev.Assets, specs, version) {
		return prev.Assets, nil
	}
	progress(ctx, "pinning %d assets of version %s", len(specs), version)
	assets, err := r.Sources.PinAssets(ctx, access, kind.URL(), version, specs)
	if err != nil {
		return nil, assetError(version, rs.Status.Latest, err)
	}
	pinned := make([]uprevv1.PinnedAsset, len(assets))
	for i, a := range assets {
		pinned[i] = uprevv1.PinnedAsset{Name: a.Name, URL: a.URL, SHA256: a.SHA256}
	}
	ctrl.LoggerFrom(ctx).Info("Pinned assets", "version", version, "assets", len(pinned))
	return pinned, nil
}

// assetsPinnedFor tells whether pinned holds exactly the assets specs
// name for version, at the URLs they give.
func assetsPinnedFor(pinned []uprevv1.PinnedAsset, specs []source.AssetSpec, version string) bool {
	if len(pinned) != len(specs) {
		return false
	}
	for i, spec := range specs {
		u, err := source.AssetURL(spec.URL, version)
		if err != nil || pinned[i].Name != spec.Name || pinned[i].URL != u {
			return false
		}
	}
	return true
}

// assetError is the error of a version whose assets could not be pinned:
// it names the version refused and the one kept.
func assetError(version string, kept *uprevv1.SourceVersion, err error) error {
	keeping := "no version selected yet"
	if kept != nil {
		keeping = "keeping " + kept.Version
	}
	err = fmt.Errorf("version %s refused (%s): %w", version, keeping, err)
	switch {
	case errors.Is(err, source.ErrChecksumMismatch):
		return degraded(uprevv1.ChecksumMismatchReason, err)
	case errors.Is(err, source.ErrInvalidResponse):
		return degraded(uprevv1.AssetRefusedReason, err)
	default:
		return sourceError(err)
	}
}

// sourceURL is the URL of a ReleaseSource's server, whose host its
// credentials belong to (sourcekind.Kind.URL); "" for a spec of no kind.
func sourceURL(rs *uprevv1.ReleaseSource) string {
	kind, err := sourcekind.Of(rs.Spec)
	if err != nil {
		return ""
	}
	return kind.URL()
}

// checkReleaseSource returns the kind of a ReleaseSource, or refuses a
// spec that cannot work as written, before anything is read: no interval,
// a policy or filter that does not compile, not exactly one kind, what the
// kind refuses (a JSONPath that does not parse).
func checkReleaseSource(rs *uprevv1.ReleaseSource) (sourcekind.Kind, error) {
	if rs.Spec.Interval.Duration <= 0 {
		return nil, stalledf(uprevv1.InvalidSpecReason, "spec.interval must be set")
	}
	if _, err := policy.NewSelector(rs.Spec.Policy); err != nil {
		return nil, stalled(uprevv1.InvalidPolicyReason, fmt.Errorf("spec.policy: %w", err))
	}
	if _, err := policy.NewFilter(rs.Spec.FilterTags); err != nil {
		return nil, stalled(uprevv1.InvalidPolicyReason, fmt.Errorf("spec.filterTags: %w", err))
	}
	for i, a := range rs.Spec.Assets {
		for field, tmpl := range map[string]string{"url": a.URL, "checksum.url": checksumURL(a)} {
			if tmpl == "" {
				continue
			}
			if _, err := source.AssetURL(tmpl, "0.0.0"); err != nil {
				return nil, stalled(uprevv1.InvalidSpecReason, fmt.Errorf("spec.assets[%d].%s: %w", i, field, err))
			}
		}
	}
	kind, err := sourcekind.Of(rs.Spec)
	if err != nil {
		return nil, stalled(uprevv1.InvalidSpecReason, err)
	}
	if err := kind.Check(); err != nil {
		return nil, stalled(uprevv1.InvalidSpecReason, err)
	}
	return kind, nil
}

// checksumURL is the checksum file URL template of a, or "".
func checksumURL(a uprevv1.AssetSpec) string {
	if a.Checksum == nil {
		return ""
	}
	return a.Checksum.URL
}

// sourceScanDueIn returns how long until rs is due for a scan; 0 means
// now. A scan is due when none succeeded yet, the spec changed, a
// reconcile was requested, the source is not Ready, or the interval
// passed.
func sourceScanDueIn(rs *uprevv1.ReleaseSource, now time.Time) time.Duration {
	last := rs.Status.LastScan
	if last == nil || rs.Status.ObservedGeneration != rs.Generation || !conditions.IsReady(rs) {
		return 0
	}
	if token, ok := meta.ReconcileAnnotationValue(rs.GetAnnotations()); ok && token != rs.Status.GetLastHandledReconcileRequest() {
		return 0
	}
	return max(0, last.Time.Add(rs.Spec.Interval.Duration).Sub(now))
}

// listError sorts an error of a kind's listing: a field that cannot work
// as written Stalls; a Git listing's errors are sorted as Git's (gitError;
// a listing past its bound is retried at the interval as an HTTP source's
// answer past its bound); an HTTP source's by sourceError.
func listError(err error) error {
	var field *sourcekind.FieldError
	var git *sourcekind.GitError
	switch {
	case errors.As(err, &field):
		return stalled(uprevv1.InvalidSpecReason, err)
	case !errors.As(err, &git):
		return sourceError(err)
	case errors.Is(err, gitrepo.ErrListingTooLarge):
		return degraded(uprevv1.SourceInvalidReason, err)
	default:
		return gitError(err)
	}
}

// sourceError sorts an error of internal/source into Stalled, retried or
// degraded, with a condition reason. An answer that is not the source's
// format is not retried before the interval: the next scan may find it
// fixed.
func sourceError(err error) error {
	var limited *source.RateLimitError
	switch {
	case errors.As(err, &limited):
		return transientAfter(uprevv1.RateLimitedReason, err, limited.RetryAfter)
	case errors.Is(err, source.ErrInvalidConfig), errors.Is(err, outbound.ErrDenied):
		return stalled(uprevv1.InvalidSpecReason, err)
	case errors.Is(err, source.ErrUnauthorized):
		return transient(uprevv1.AuthenticationFailedReason, err)
	case errors.Is(err, source.ErrInvalidResponse):
		return degraded(uprevv1.SourceInvalidReason, err)
	case errors.Is(err, source.ErrNotListed):
		return degraded(uprevv1.NoMatchingVersionReason, err)
	default:
		return transient(uprevv1.SourceUnreachableReason, err)
	}
}

// recordLatest sets status.latest of a source of kind, keeping the
// previous one and recording an event when it changed.
func (r *ReleaseSourceReconciler) recordLatest(rs *uprevv1.ReleaseSource, kind sourcekind.Kind, latest *uprevv1.SourceVersion) {
	prev := rs.Status.Latest
	if equality.Semantic.DeepEqual(prev, latest) {
		return
	}
	if prev != nil {
		rs.Status.ObservedPrevious = prev.DeepCopy()
		r.Events.Eventf(rs, nil, corev1.EventTypeNormal, "LatestVersionChanged", "Select",
			"Latest version of %s updated from %s to %s", kind.Describe(), prev.Version, latest.Version)
	}
	rs.Status.Latest = latest
}

// sourceMessage is the Ready message of a scanned source of kind.
func sourceMessage(rs *uprevv1.ReleaseSource, kind sourcekind.Kind) string {
	if rs.Status.Latest == nil || rs.Status.LastScan == nil {
		return "no scan yet"
	}
	return fmt.Sprintf("Latest version of %s resolved to %s (%d versions)", kind.Describe(), rs.Status.Latest.Version, rs.Status.LastScan.VersionCount)
}
