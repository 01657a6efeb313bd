package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
	"github.com/uprev-dev/uprev/internal/registry"
)

// maxMovesPerSelection bounds the moved tags one selection finds: each
// costs a digest look-up and a selection again, and is recorded, so a
// registry whose tags all moved is worked through over several runs.
const maxMovesPerSelection = 20

// selectGated selects through gates as gate.Select does, then checks the
// selected version's digest, and selects again while a check holds it
// back: candidates are judged newest first, down to the first that passes.
// With a minReleaseAge, the candidate's digest is recorded in the tag store,
// and a tag found at another digest than the one recorded is seen anew
// (seeDigest), so that it waits for the age again; the newest version
// waiting for its age has its digest recorded once (recordWaiting). With
// verify, the digest's signature must verify. The Selection's Digest is
// the digest checked.
func (r *ImagePolicyReconciler) selectGated(ctx context.Context, pol *imagev1.ImagePolicy, repo *imagev1.ImageRepository, tags []registry.SeenTag, gates []gate.Gate) (gate.Selection, error) {
	checks, err := r.verificationsOf(ctx, pol, repo, gates)
	if err != nil {
		return gate.Selection{}, err
	}
	aged := slices.ContainsFunc(gates, func(g gate.Gate) bool { return g.MinReleaseAge > 0 })
	now := r.Clock.Now()
	if len(checks) == 0 && !aged {
		return gate.Select(pol.Spec.Policy, pol.Spec.FilterTags, repo.Spec.Image, tags, gates, now)
	}
	reg := &lazyRegistry{r: r, pol: pol, repo: repo}
	defer reg.release()
	fetched, moves := 0, 0
	for {
		sel, err := gate.Select(pol.Spec.Policy, pol.Spec.FilterTags, repo.Spec.Image, tags, gates, now)
		if err == nil && aged {
			r.recordWaiting(ctx, reg, repo, tags, sel)
		}
		if err != nil || sel.Tag == "" {
			return sel, err
		}
		var digest string
		if aged {
			if moves == maxMovesPerSelection {
				return gate.Selection{}, transient(uprevv1.ReleaseGatedReason,
					fmt.Errorf("found %d tags moved to new digests, each waiting for its age again; going on with %s in the next run", moves, sel.Tag))
			}
			var moved bool
			if digest, moved, err = r.seeDigest(ctx, reg, pol, repo, tags, sel.Tag); err != nil {
				return gate.Selection{}, err
			}
			if moved {
				moves++
				continue
			}
		}
		if len(checks) > 0 {
			if fetched >= maxVerificationsPerSelection {
				return gate.Selection{}, transient(uprevv1.VerificationFailedReason,
					fmt.Errorf("read the signatures of %d versions, none verified yet; going on with %s in the next run", fetched, sel.Tag))
			}
			c, err := reg.client(ctx)
			if err != nil {
				return gate.Selection{}, err
			}
			if digest == "" {
				if digest, err = c.Digest(ctx, repo.Spec.Image, sel.Tag); err != nil {
					return gate.Selection{}, registryError(err)
				}
			}
			signers, refused, err := r.verifyCandidate(ctx, c, repo.Spec.Image, gates, checks, sel.Tag, digest, &fetched)
			if err != nil {
				return gate.Selection{}, err
			}
			if refused {
				continue
			}
			sel.Signers = signers
		}
		sel.Digest = digest
		return sel, nil
	}
}

// seeDigest returns the digest tag points at now and whether it moved, and
// records it in the tag store: a tag found at another digest than the one
// recorded is seen anew, and tags (where tag is) gets its new first-seen
// time, so that selecting again holds it back. The digest is looked up as
// reflectDigest does, unless the policy's last look-up of the same tag
// found the recorded digest during the repository's current scan (the
// digestCache) and the policy does not ask for a look-up every time
// (digestReflectionPolicy Always).
func (r *ImagePolicyReconciler) seeDigest(ctx context.Context, reg *lazyRegistry, pol *imagev1.ImagePolicy, repo *imagev1.ImageRepository, tags []registry.SeenTag, tag string) (string, bool, error) {
	i := slices.IndexFunc(tags, func(t registry.SeenTag) bool { return t.Name == tag })
	if i < 0 {
		return "", false, fmt.Errorf("selected %s, which is not among the stored tags", tag)
	}
	stored := tags[i]
	scan := repo.Status.LastScanResult.ScanTime
	key := client.ObjectKeyFromObject(pol)
	if pol.GetDigestReflectionPolicy() != imagev1.ReflectAlways && r.digests.confirmed(key, repoKey(repo), stored, scan) {
		return stored.Digest, false, nil
	}
	seen, err := r.recordDigest(ctx, reg, repo, tags, i)
	if err != nil {
		return "", false, err
	}
	r.digests.confirm(key, repoKey(repo), seen, scan)
	moved := !seen.FirstSeen.Equal(stored.FirstSeen)
	if moved {
		ctrl.LoggerFrom(ctx).Info("Tag moved to a new digest, seen anew", "tag", tag, "digest", seen.Digest, "before", stored.Digest)
	}
	return seen.Digest, moved, nil
}

// recordDigest looks up the digest tags[i] points at now, records it in
// the tag store (SeeDigest: a tag found moved is seen anew) and returns
// the tag as stored now, which tags[i] becomes.
func (r *ImagePolicyReconciler) recordDigest(ctx context.Context, reg *lazyRegistry, repo *imagev1.ImageRepository, tags []registry.SeenTag, i int) (registry.SeenTag, error) {
	c, err := reg.client(ctx)
	if err != nil {
		return registry.SeenTag{}, err
	}
	digest, err := c.Digest(ctx, repo.Spec.Image, tags[i].Name)
	if err != nil {
		return registry.SeenTag{}, registryError(err)
	}
	seen, err := r.Tags.SeeDigest(repoKey(repo), tags[i].Name, digest)
	if err != nil {
		return registry.SeenTag{}, transient(uprevv1.ReleaseGatedReason, err)
	}
	tags[i] = seen
	return seen, nil
}

// recordWaiting records the digest of the newest version that waits for
// its age, when none is recorded yet: one look-up per tag, made once, so
// that a tag moved while it waits is found moved when it would be
// selected. A failure is left for the next evaluation.
func (r *ImagePolicyReconciler) recordWaiting(ctx context.Context, reg *lazyRegistry, repo *imagev1.ImageRepository, tags []registry.SeenTag, sel gate.Selection) {
	if len(sel.Waiting) == 0 || !slices.ContainsFunc(sel.Waiting[0].Holds, func(h gate.Hold) bool { return h.Kind == gate.MinReleaseAge }) {
		return
	}
	tag := sel.Waiting[0].Tag
	i := slices.IndexFunc(tags, func(t registry.SeenTag) bool { return t.Name == tag })
	if i < 0 || tags[i].Digest != "" {
		return
	}
	if _, err := r.recordDigest(ctx, reg, repo, tags, i); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Not recording the digest of a waiting version", "tag", tag, "error", err.Error())
	}
}

// lazyRegistry is the registry client of one selection, reached (and a
// share of the policy workers held) on first use.
type lazyRegistry struct {
	r    *ImagePolicyReconciler
	pol  *imagev1.ImagePolicy
	repo *imagev1.ImageRepository
	reg  *registry.Client
	done func()
}

// client returns the client, reaching it on the first call.
func (l *lazyRegistry) client(ctx context.Context) (*registry.Client, error) {
	if l.reg == nil {
		reg, done, err := l.r.registryFor(ctx, l.pol, l.repo, "check the selected version's digest")
		if err != nil {
			return nil, err
		}
		l.reg, l.done = reg, done
	}
	return l.reg, nil
}

// release gives the share of the workers back, if one was taken.
func (l *lazyRegistry) release() {
	if l.done != nil {
		l.done()
	}
}

// digestCache remembers, per gated policy, the tag its last selection
// checked, the digest found, and the scan of the repository it was found
// in, so that evaluations between two scans (the ReleaseGate's, a
// promotion Sync's change, a requeue) look nothing up. It holds one entry
// per policy; a deleted policy's is forgotten.
type digestCache struct {
	mu sync.Mutex
	m  map[types.NamespacedName]confirmedDigest
}

// confirmedDigest is what one look-up found.
type confirmedDigest struct {
	repo, tag, digest string
	scan              metav1.Time
}

// confirmed tells whether the policy's last look-up found stored's
// recorded digest for its tag in repo during the scan of scan time.
func (c *digestCache) confirmed(pol types.NamespacedName, repo string, stored registry.SeenTag, scan metav1.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[pol]
	return ok && stored.Digest != "" && e.repo == repo && e.tag == stored.Name && e.digest == stored.Digest && e.scan.Equal(&scan)
}

// confirm remembers that a look-up for pol found seen's digest during the
// scan of scan time.
func (c *digestCache) confirm(pol types.NamespacedName, repo string, seen registry.SeenTag, scan metav1.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.NamespacedName]confirmedDigest{}
	}
	c.m[pol] = confirmedDigest{repo: repo, tag: seen.Name, digest: seen.Digest, scan: scan}
}

// forget drops the entry of a deleted policy.
func (c *digestCache) forget(pol types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, pol)
}

// rescannedPredicate passes ImageRepository updates of a scan that found
// the same tags as the one before (scanChangedPredicate passes the
// others): a tag may have moved to a new digest all the same.
type rescannedPredicate struct {
	predicate.Funcs
}

// Update passes an update when the scan time changed and the tags did not,
// or when a requested scan was handled (two scans within a second have
// the same time).
func (rescannedPredicate) Update(e event.UpdateEvent) bool {
	before, ok := e.ObjectOld.(*imagev1.ImageRepository)
	if !ok || before.Status.LastScanResult == nil {
		return false
	}
	after, ok := e.ObjectNew.(*imagev1.ImageRepository)
	if !ok || after.Status.LastScanResult == nil {
		return false
	}
	return scanRevision(before) == scanRevision(after) &&
		(!before.Status.LastScanResult.ScanTime.Equal(&after.Status.LastScanResult.ScanTime) ||
			before.Status.LastHandledReconcileAt != after.Status.LastHandledReconcileAt)
}

// rescannedPoliciesOfRepository maps a rescanned ImageRepository to its
// policies waiting for this manager to store its tags (waitForTags), and
// to those that a ReleaseGate with a minReleaseAge or verify selects: only
// those check, once per scan, whether their selected tag moved
// (seeDigest), or whether a version refused for its signature has been
// signed since (verificationRound).
func (r *ImagePolicyReconciler) rescannedPoliciesOfRepository(ctx context.Context, obj client.Object) []reconcile.Request {
	policies, err := r.policiesUsing(ctx, obj)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing image policies of a repository")
		return nil
	}
	gates := map[string][]uprevv1.ReleaseGate{}
	var reqs []reconcile.Request
	for i := range policies {
		pol := &policies[i]
		if r.tagWaits.waiting(pol.UID) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pol)})
			continue
		}
		list, ok := gates[pol.Namespace]
		if !ok {
			var l uprevv1.ReleaseGateList
			if err := r.List(ctx, &l, client.InNamespace(pol.Namespace)); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Listing release gates of an image policy")
				return nil
			}
			list, gates[pol.Namespace] = l.Items, l.Items
		}
		if slices.ContainsFunc(list, func(rg uprevv1.ReleaseGate) bool {
			age, err := specDuration("spec.minReleaseAge", rg.Spec.MinReleaseAge, "72h")
			return err == nil && (age > 0 || rg.Spec.Verify != nil || rg.Spec.Attestations != nil) && gateSelects(&rg, pol)
		}) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pol)})
		}
	}
	return reqs
}
