package controllers

// +kubebuilder:rbac:groups=uprev.dev,resources=releasegates,verbs=get;list;watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
	"github.com/uprev-dev/uprev/internal/policy"
)

// selectLatest selects the policy's latest tag from the stored tags of
// repo, through the release gates that select the policy. Without gates
// it is policy.SelectLatest.
func (r *ImagePolicyReconciler) selectLatest(ctx context.Context, pol *imagev1.ImagePolicy, repo *imagev1.ImageRepository) (gate.Selection, error) {
	gates, err := r.gatesOf(ctx, pol)
	if err != nil {
		return gate.Selection{}, err
	}
	var sel gate.Selection
	var count int
	if len(gates) == 0 {
		tags, readErr := r.Tags.Tags(repoKey(repo))
		if readErr != nil {
			return gate.Selection{}, r.storedTagsError(pol, repo, readErr)
		}
		count = len(tags)
		sel.Tag, err = policy.SelectLatest(pol.Spec.Policy, pol.Spec.FilterTags, tags)
		if err == nil && (pol.Status.LatestRef == nil || pol.Status.LatestRef.Tag != sel.Tag) {
			if err := ungatedForSure(ctx, r.liveGates, pol); err != nil {
				return gate.Selection{}, err
			}
		}
	} else {
		tags, readErr := r.Tags.SeenTags(repoKey(repo))
		if readErr != nil {
			return gate.Selection{}, r.storedTagsError(pol, repo, readErr)
		}
		count = len(tags)
		sel, err = r.selectGated(ctx, pol, repo, tags, gates)
	}
	r.tagWaits.done(pol.UID)
	var reasoned *transientError
	switch {
	case errors.Is(err, policy.ErrInvalidPolicy):
		return gate.Selection{}, stalled(invalidPolicyReason, err)
	case errors.As(err, &reasoned):
		// A gate's check says why (VerificationFailed, ReleaseGated...): kept.
		return gate.Selection{}, &transientError{reason: reasoned.reason, retryAfter: reasoned.retryAfter, putOff: reasoned.putOff,
			err: fmt.Errorf("selecting from %d tags of %s: %w", count, repo.Spec.Image, err)}
	case err != nil:
		return gate.Selection{}, transient(noMatchReason, fmt.Errorf("selecting from %d tags of %s: %w", count, repo.Spec.Image, err))
	}
	return sel, nil
}

// storedTagsError is the error of pol's run when the tags of its scanned
// repository cannot be read. Tags not stored yet, as in a manager started
// with empty storage before its first scan of the repository, are waited
// for quietly (quietWaits.waitForTags).
func (r *ImagePolicyReconciler) storedTagsError(pol *imagev1.ImagePolicy, repo *imagev1.ImageRepository, err error) error {
	notReady := transient(meta.DependencyNotReadyReason,
		fmt.Errorf("tags of ImageRepository %s/%s are not stored yet: %w", repo.Namespace, repo.Name, err))
	if !errors.Is(err, fs.ErrNotExist) {
		return notReady
	}
	return r.tagWaits.waitForTags(pol, r.Clock.Now(), notReady)
}

// gatesOf returns the gates of the ReleaseGates that select pol. A gate
// whose selector does not parse selects nothing (it is Stalled itself); a
// gate that selects pol but cannot be evaluated (an invalid spec, a
// promotion Sync or target that does not exist) fails the selection, so
// that no version passes a gate that cannot be evaluated.
func (r *ImagePolicyReconciler) gatesOf(ctx context.Context, pol *imagev1.ImagePolicy) ([]gate.Gate, error) {
	var list uprevv1.ReleaseGateList
	if err := r.List(ctx, &list, client.InNamespace(pol.Namespace)); err != nil {
		return nil, fmt.Errorf("listing ReleaseGates: %w", err)
	}
	var gates []gate.Gate
	for i := range list.Items {
		rg := &list.Items[i]
		if !gateSelects(rg, pol) {
			continue
		}
		g, err := gateOf(ctx, r.Client, rg)
		var stall *stalledError
		var degrade *degradedError
		switch {
		case errors.As(err, &stall) || errors.As(err, &degrade):
			// The gate's own reason is not the policy's: %v, not %w.
			return nil, degraded(uprevv1.GateInvalidReason, fmt.Errorf("ReleaseGate %s: %v", rg.Name, err))
		case err != nil:
			return nil, fmt.Errorf("ReleaseGate %s: %w", rg.Name, err)
		}
		gates = append(gates, g)
	}
	return gates, nil
}

// ungatedForSure checks, before a policy that the cache shows no
// ReleaseGate for moves, that none selects it on the API server (live, a
// reader past the cache): a gate created just before the policy, or just
// before a new version, may not be in the cache yet, and the policy would
// move to a version no gate let through. One that does is a transient
// error, retried within a second, when the cache has it.
func ungatedForSure(ctx context.Context, live client.Reader, pol *imagev1.ImagePolicy) error {
	var list uprevv1.ReleaseGateList
	if err := live.List(ctx, &list, client.InNamespace(pol.Namespace)); err != nil {
		return fmt.Errorf("listing ReleaseGates: %w", err)
	}
	for i := range list.Items {
		if rg := &list.Items[i]; gateSelects(rg, pol) {
			return transientAfter(meta.DependencyNotReadyReason,
				fmt.Errorf("ReleaseGate %s selects the policy and is not in the manager's cache yet", rg.Name), time.Second)
		}
	}
	return nil
}

// gateSelects tells whether the ReleaseGate rg selects the ImagePolicy
// pol. A selector that does not parse selects nothing (the gate is Stalled
// itself).
func gateSelects(rg *uprevv1.ReleaseGate, pol client.Object) bool {
	sel, err := metav1.LabelSelectorAsSelector(&rg.Spec.PolicySelector)
	return err == nil && sel.Matches(labels.Set(pol.GetLabels()))
}

// gateOf reads the gate a ReleaseGate sets, with what the targets of its
// promotion's Sync report. A spec that cannot be read is a stalled error
// naming the field; a promotion Sync or target that does not exist, or a
// Sync whose targets never report healthy, is a degraded one (a change of
// the Sync can fix it); reading the Sync may fail transiently.
func gateOf(ctx context.Context, c client.Reader, rg *uprevv1.ReleaseGate) (gate.Gate, error) {
	g := gate.Gate{Name: rg.Name}
	var err error
	if g.MinReleaseAge, err = specDuration("spec.minReleaseAge", rg.Spec.MinReleaseAge, "72h"); err != nil {
		return g, err
	}
	p := rg.Spec.Promotion
	if p == nil {
		return g, nil
	}
	healthyFor, err := specDuration("spec.promotion.healthyFor", p.HealthyFor, "24h")
	if err != nil {
		return g, err
	}
	s := &uprevv1.Sync{}
	// By name in the gate's own namespace: another namespace's Sync cannot be named.
	if err := c.Get(ctx, client.ObjectKey{Namespace: rg.Namespace, Name: p.Sync}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return g, degraded(uprevv1.PromotionSyncNotFoundReason, fmt.Errorf("spec.promotion.sync: Sync %s/%s not found", rg.Namespace, p.Sync))
		}
		return g, fmt.Errorf("reading Sync %s/%s: %w", rg.Namespace, p.Sync, err)
	}
	statuses, err := targetStatuses(ctx, c, s)
	if err != nil {
		return g, err
	}
	targets, err := promotionTargets(s, statuses, p.Targets)
	if err != nil {
		return g, err
	}
	g.Promotion = &gate.PromotionGate{Sync: s.Name, Targets: targets, HealthyFor: healthyFor}
	return g, nil
}

// specDuration parses the duration field of a ReleaseGate's spec; empty is
// 0. The error is stalled and names the field, with example as a valid
// value.
func specDuration(field, value, example string) (time.Duration, error) {
	if value == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(value)
	if err != nil || d < 0 {
		return 0, stalledf(uprevv1.InvalidDurationReason, "%s %q is not a duration of 0 or more, such as %s", field, value, example)
	}
	return d, nil
}

// promotionTargets returns what the named targets of s report in statuses
// (all of them when names is empty), in the order of names. A name the Sync does
// not have, or a Sync that does not check health, is a degraded error.
func promotionTargets(s *uprevv1.Sync, statuses map[string]uprevv1.TargetStatus, names []string) ([]gate.Target, error) {
	if !s.Spec.Wait {
		return nil, degraded(uprevv1.PromotionNeverHealthyReason, fmt.Errorf(
			"spec.promotion.sync: Sync %s does not check health (spec.wait is false), so its targets never report healthy and no version could pass", s.Name))
	}
	if len(names) == 0 {
		for _, t := range s.Spec.Targets {
			names = append(names, t.Name)
		}
	}
	targets := make([]gate.Target, 0, len(names))
	for _, name := range names {
		if !slices.ContainsFunc(s.Spec.Targets, func(t uprevv1.Target) bool { return t.Name == name }) {
			return nil, degraded(uprevv1.PromotionTargetNotFoundReason, fmt.Errorf("spec.promotion.targets: Sync %s has no target %q", s.Name, name))
		}
		t := gate.Target{Name: name}
		if ts, ok := statuses[name]; ok {
			for _, c := range ts.Components {
				t.Components = append(t.Components, gate.Component{Image: c.Image, Tag: c.Tag, Digest: c.Digest})
			}
			if ts.Healthy && ts.HealthySince != nil {
				t.HealthySince = ts.HealthySince.Time
			}
		}
		targets = append(targets, t)
	}
	return targets, nil
}

// gatedOutcome completes the outcome of a selection that gates took part
// in: a Ready message naming what waits and until when, and a requeue
// when the first waiting version becomes eligible. When every version is
// held back the policy keeps its latestRef: Ready with o's message saying
// so when it has one (a promotion soaking in the earlier stage is the
// usual case), not Ready when it has none (o has no message).
func gatedOutcome(o outcome, sel gate.Selection, now time.Time) outcome {
	if !sel.NextEligibleAt.IsZero() {
		next := max(sel.NextEligibleAt.Sub(now), time.Second)
		if o.requeueAfter <= 0 || next < o.requeueAfter {
			o.requeueAfter = next
		}
	}
	if len(sel.Waiting) == 0 {
		return o
	}
	w := sel.Waiting[0]
	waits := waitText(w.Tag, w.Holds[0])
	if more := len(sel.Waiting) - 1; more > 0 {
		waits += fmt.Sprintf(", and %d more newer version(s) wait", more)
	}
	if sel.Tag == "" && o.message == "" {
		o.err = degraded(uprevv1.ReleaseGatedReason, fmt.Errorf("no version passes the release gates yet: %s", waits))
		return o
	}
	o.message += "; " + waits
	return o
}

// waitText says, for a person, that hold holds tag back:
// "1.5.1 waits for minReleaseAge until <time> (ReleaseGate prod)",
// "1.5.0 waits for promotion: eu-staging runs 1.4.2 (ReleaseGate prod)".
func waitText(tag string, hold gate.Hold) string {
	switch {
	case hold.Kind == gate.Verify:
		return fmt.Sprintf("%s refused: %s (ReleaseGate %s; signatures read again from %s)", tag, hold.Reason, hold.Gate, hold.EligibleAt.UTC().Format(time.RFC3339))
	case hold.Kind == gate.Attestations:
		return fmt.Sprintf("%s refused: %s (ReleaseGate %s; attestations read again at the next scan, or from %s)", tag, hold.Reason, hold.Gate, hold.EligibleAt.UTC().Format(time.RFC3339))
	case hold.Kind == gate.MinReleaseAge:
		return fmt.Sprintf("%s waits for %s until %s (ReleaseGate %s)", tag, hold.Kind, hold.EligibleAt.UTC().Format(time.RFC3339), hold.Gate)
	case hold.EligibleAt.IsZero():
		return fmt.Sprintf("%s waits for %s: %s (ReleaseGate %s)", tag, hold.Kind, hold.Reason, hold.Gate)
	default:
		return fmt.Sprintf("%s waits for %s until %s: %s (ReleaseGate %s)", tag, hold.Kind, hold.EligibleAt.UTC().Format(time.RFC3339), hold.Reason, hold.Gate)
	}
}

// policiesOfGate maps a ReleaseGate to the ImagePolicies of its namespace
// it selects.
func (r *ImagePolicyReconciler) policiesOfGate(ctx context.Context, obj client.Object) []reconcile.Request {
	rg := obj.(*uprevv1.ReleaseGate)
	sel, err := metav1.LabelSelectorAsSelector(&rg.Spec.PolicySelector)
	if err != nil {
		return nil
	}
	var list imagev1.ImagePolicyList
	if err := r.List(ctx, &list, client.InNamespace(rg.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing image policies of a release gate")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return reqs
}

// promotionSyncIndex indexes ReleaseGates by `<namespace>/<name>` of the
// Sync their promotion names.
const promotionSyncIndex = ".spec.promotion.sync"

// indexPromotionSyncs adds promotionSyncIndex, which both the ImagePolicy
// and the ReleaseGate controllers use to find the gates of a Sync.
func indexPromotionSyncs(ctx context.Context, mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &uprevv1.ReleaseGate{}, promotionSyncIndex, func(obj client.Object) []string {
		rg := obj.(*uprevv1.ReleaseGate)
		if rg.Spec.Promotion == nil {
			return nil
		}
		return []string{client.ObjectKey{Namespace: rg.Namespace, Name: rg.Spec.Promotion.Sync}.String()}
	})
	if err != nil {
		return fmt.Errorf("indexing release gates by promotion Sync: %w", err)
	}
	return nil
}

// gatesPromotingFrom returns the ReleaseGates whose promotion names the
// Sync s.
func gatesPromotingFrom(ctx context.Context, c client.Reader, s client.Object) ([]uprevv1.ReleaseGate, error) {
	var list uprevv1.ReleaseGateList
	if err := c.List(ctx, &list, client.MatchingFields{promotionSyncIndex: client.ObjectKeyFromObject(s).String()}); err != nil {
		return nil, fmt.Errorf("listing release gates promoting from Sync %s: %w", client.ObjectKeyFromObject(s), err)
	}
	return list.Items, nil
}

// policiesOfSync maps a Sync to the ImagePolicies of the ReleaseGates
// promoting from it, so that they select again when what the Sync's
// targets run or their health changes.
func (r *ImagePolicyReconciler) policiesOfSync(ctx context.Context, obj client.Object) []reconcile.Request {
	gates, err := gatesPromotingFrom(ctx, r.Client, obj)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Mapping a Sync to image policies")
		return nil
	}
	var reqs []reconcile.Request
	for i := range gates {
		reqs = append(reqs, r.policiesOfGate(ctx, &gates[i])...)
	}
	return reqs
}
