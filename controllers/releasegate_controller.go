package controllers

// +kubebuilder:rbac:groups=uprev.dev,resources=releasegates,verbs=get;list;watch
// +kubebuilder:rbac:groups=uprev.dev,resources=releasegates/status,verbs=get;update;patch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/predicates"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
)

// ReleaseGateReconciler reports, on each ReleaseGate, what the ImagePolicies
// it selects now select and which newer versions wait at it. The gating
// itself is the ImagePolicyReconciler's.
type ReleaseGateReconciler struct {
	reconciler
	// Policies selects as the ImagePolicy controller does: same tag store,
	// same access rules.
	Policies *ImagePolicyReconciler
	// Clock tells the time; the wall clock when nil.
	Clock clock.PassiveClock
	// announced keeps the releases announced with GateReleased.
	announced releases
}

// SetupWithManager registers the reconciler; opts sets its concurrency.
func (r *ReleaseGateReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.Client = mgr.GetClient()
	r.Events = mgr.GetEventRecorder("uprev-release-gate")
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&uprevv1.ReleaseGate{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))).
		Watches(&imagev1.ImagePolicy{}, handler.EnqueueRequestsFromMapFunc(r.gatesOfPolicy)).
		// The index is the ImagePolicy controller's, set up before this one.
		Watches(&uprevv1.Sync{}, handler.EnqueueRequestsFromMapFunc(r.gatesOfSync),
			builder.WithPredicates(promotionChangedPredicate{})).
		WithOptions(opts).
		Complete(r)
}

// gatesOfPolicy maps an ImagePolicy to the ReleaseGates of its namespace
// that select it.
func (r *ReleaseGateReconciler) gatesOfPolicy(ctx context.Context, obj client.Object) []reconcile.Request {
	var list uprevv1.ReleaseGateList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing release gates of an image policy")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if gateSelects(&list.Items[i], obj) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// gatesOfSync maps a Sync to the ReleaseGates promoting from it.
func (r *ReleaseGateReconciler) gatesOfSync(ctx context.Context, obj client.Object) []reconcile.Request {
	gates, err := gatesPromotingFrom(ctx, r.Client, obj)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Mapping a Sync to release gates")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(gates))
	for i := range gates {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&gates[i])})
	}
	return reqs
}

// Reconcile writes the status of one ReleaseGate.
func (r *ReleaseGateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rg := &uprevv1.ReleaseGate{}
	if err := r.Get(ctx, req.NamespacedName, rg); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetObject(rg, req.NamespacedName)
			r.announced.forgetGate(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	st := statusFields{&rg.Status.ObservedGeneration, &rg.Status.ReconcileRequestStatus}
	return r.run(ctx, rg, st, false, func(ctx context.Context, _ progressFunc) outcome {
		return r.reconcile(ctx, rg)
	})
}

// reconcile checks the spec and reports each selected policy.
func (r *ReleaseGateReconciler) reconcile(ctx context.Context, rg *uprevv1.ReleaseGate) outcome {
	sel, err := metav1.LabelSelectorAsSelector(&rg.Spec.PolicySelector)
	if err != nil {
		return outcome{err: stalledf(uprevv1.InvalidSelectorReason, "spec.policySelector: %w", err)}
	}
	g, err := gateOf(ctx, r.Client, rg)
	if err != nil {
		return outcome{err: err}
	}
	if rg.Spec.Verify != nil {
		if _, err := r.Policies.verifyPolicy(ctx, rg); err != nil {
			return outcome{err: err}
		}
	}
	var list imagev1.ImagePolicyList
	if err := r.List(ctx, &list, client.InNamespace(rg.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return outcome{err: fmt.Errorf("listing ImagePolicies: %w", err)}
	}
	policies := list.Items
	slices.SortFunc(policies, func(a, b imagev1.ImagePolicy) int { return strings.Compare(a.Name, b.Name) })
	omitted := max(0, len(policies)-uprevv1.MaxGatedPolicies)
	policies = policies[:len(policies)-omitted]

	now := r.Clock.Now()
	var next time.Time
	before := rg.Status.Policies
	rg.Status.Policies = make([]uprevv1.GatedPolicy, 0, len(policies))
	waiting := 0
	for i := range policies {
		gp, eligible, selected := r.gatedPolicy(ctx, g, &policies[i])
		key := gatedPolicyKey{gate: client.ObjectKeyFromObject(rg), policy: gp.Name}
		r.announced.waitingAgain(key, gp.Waiting)
		if w := released(before, gp, selected.Tag); w != nil && r.announced.first(key, selected) {
			at := ""
			if selected.Digest != "" {
				at = " at " + selected.Digest
			}
			r.Events.Eventf(&policies[i], nil, corev1.EventTypeNormal, uprevv1.GateReleasedReason, "Release",
				"%s no longer waits for %s at ReleaseGate %s and is selected%s", w.Tag, w.Gate, rg.Name, at)
		}
		rg.Status.Policies = append(rg.Status.Policies, gp)
		waiting += len(gp.Waiting)
		if !eligible.IsZero() && (next.IsZero() || eligible.Before(next)) {
			next = eligible
		}
	}
	o := outcome{message: fmt.Sprintf("Gates %d ImagePolicies, %d version(s) wait", len(policies), waiting)}
	if omitted > 0 {
		o.message += fmt.Sprintf(" (%d more policies not listed)", omitted)
	}
	if !next.IsZero() {
		o.requeueAfter = max(next.Sub(now), time.Second)
	}
	return o
}

// gatedPolicy reports one policy: what it selects, with what gate g
// checked of it (the signature its verify accepted, the targets of its
// promotion that run it healthy), and what waits at g, with the earliest
// time one of those becomes eligible,
// and the selection the gates now let it make, as the ImagePolicy
// controller makes it (a tag moved to a new digest waits for its age
// again here too). A policy that cannot select now (no tags yet, no
// access) reports its latestRef alone; its own status says why.
func (r *ReleaseGateReconciler) gatedPolicy(ctx context.Context, g gate.Gate, pol *imagev1.ImagePolicy) (uprevv1.GatedPolicy, time.Time, gate.Selection) {
	gp := uprevv1.GatedPolicy{Name: pol.Name}
	ref := pol.Status.LatestRef
	if ref != nil {
		gp.Latest = &uprevv1.GatedVersion{Tag: ref.Tag, Digest: ref.Digest}
	}
	sel, err := r.selection(ctx, pol)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Not listing what waits for an image policy", "imagePolicy", klog.KObj(pol), "error", err.Error())
		return gp, time.Time{}, gate.Selection{}
	}
	if ref != nil && sel.Tag == ref.Tag && (sel.Digest == "" || ref.Digest == "" || sel.Digest == ref.Digest) {
		gp.Latest.SignedBy = sel.Signers[g.Name]
		for _, p := range gate.PromotedBy(g, ref.Name, ref.Tag, ref.Digest) {
			gp.Latest.Promoted = append(gp.Latest.Promoted, uprevv1.PromotedTarget{Sync: p.Sync, Target: p.Target, HealthySince: metav1.NewTime(p.HealthySince)})
		}
	}
	gp, next := withWaiting(gp, g.Name, sel)
	return gp, next, sel
}

// selection is the policy's selection through its gates, as the
// ImagePolicy controller makes it.
func (r *ReleaseGateReconciler) selection(ctx context.Context, pol *imagev1.ImagePolicy) (gate.Selection, error) {
	repo, err := r.Policies.repository(ctx, pol)
	if err != nil {
		return gate.Selection{}, err
	}
	return r.Policies.selectLatest(ctx, pol, repo)
}
