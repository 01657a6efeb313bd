package controllers

// +kubebuilder:rbac:groups=uprev.dev,resources=releasegates,verbs=get;list;watch

import (
	"context"
	"errors"
	"fmt"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
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
			return gate.Selection{}, storedTagsError(repo, readErr)
		}
		count = len(tags)
		sel.Tag, err = policy.SelectLatest(pol.Spec.Policy, pol.Spec.FilterTags, tags)
	} else {
		tags, readErr := r.Tags.SeenTags(repoKey(repo))
		if readErr != nil {
			return gate.Selection{}, storedTagsError(repo, readErr)
		}
		count = len(tags)
		sel, err = r.selectVerified(ctx, pol, repo, tags, gates)
	}
	switch {
	case errors.Is(err, policy.ErrInvalidPolicy):
		return gate.Selection{}, stalled(invalidPolicyReason, err)
	case err != nil:
		return gate.Selection{}, transient(noMatchReason, fmt.Errorf("selecting from %d tags of %s: %w", count, repo.Spec.Image, err))
	}
	return sel, nil
}

// storedTagsError is the error of a repository whose tags cannot be read.
func storedTagsError(repo *imagev1.ImageRepository, err error) error {
	return transient(meta.DependencyNotReadyReason,
		fmt.Errorf("tags of ImageRepository %s/%s are not stored yet: %w", repo.Namespace, repo.Name, err))
}

// gatesOf returns the gates of the ReleaseGates that select pol. A gate
// whose selector does not parse selects nothing (it is Stalled itself); a
// gate that selects pol but whose spec is invalid fails the selection, so
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
		g, err := gateOf(rg)
		if err != nil {
			return nil, degraded(uprevv1.GateInvalidReason, fmt.Errorf("ReleaseGate %s: %w", rg.Name, err))
		}
		gates = append(gates, g)
	}
	return gates, nil
}

// gateSelects tells whether the ReleaseGate rg selects the ImagePolicy
// pol. A selector that does not parse selects nothing (the gate is Stalled
// itself).
func gateSelects(rg *uprevv1.ReleaseGate, pol client.Object) bool {
	sel, err := metav1.LabelSelectorAsSelector(&rg.Spec.PolicySelector)
	return err == nil && sel.Matches(labels.Set(pol.GetLabels()))
}

// gateOf reads the gate a ReleaseGate sets; the error names the field.
func gateOf(rg *uprevv1.ReleaseGate) (gate.Gate, error) {
	g := gate.Gate{Name: rg.Name}
	if rg.Spec.MinReleaseAge != "" {
		d, err := time.ParseDuration(rg.Spec.MinReleaseAge)
		if err != nil || d < 0 {
			return g, fmt.Errorf("spec.minReleaseAge %q is not a duration of 0 or more, such as 72h", rg.Spec.MinReleaseAge)
		}
		g.MinReleaseAge = d
	}
	return g, nil
}

// gatedOutcome completes the outcome of a selection that gates took part
// in: a Ready message naming what waits and until when, and a requeue
// when the first waiting version becomes eligible. When every version is
// held back the policy keeps its latestRef and is not Ready.
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
	hold := w.Holds[0]
	waits := fmt.Sprintf("%s waits for %s until %s (ReleaseGate %s)", w.Tag, hold.Kind, hold.EligibleAt.UTC().Format(time.RFC3339), hold.Gate)
	if hold.Kind == gate.Verify {
		waits = fmt.Sprintf("%s refused: %s (ReleaseGate %s; signatures read again from %s)", w.Tag, hold.Reason, hold.Gate, hold.EligibleAt.UTC().Format(time.RFC3339))
	}
	if more := len(sel.Waiting) - 1; more > 0 {
		waits += fmt.Sprintf(", and %d more newer version(s) wait", more)
	}
	if sel.Tag == "" {
		o.err = degraded(uprevv1.ReleaseGatedReason, fmt.Errorf("no version passes the release gates yet: %s", waits))
		return o
	}
	o.message += "; " + waits
	return o
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
