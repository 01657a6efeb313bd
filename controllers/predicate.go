package controllers

import (
	"maps"
	"slices"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// scanChangedPredicate passes ImageRepository updates whose scan found a
// different set of tags, so that policies select again.
type scanChangedPredicate struct {
	predicate.Funcs
}

// Update passes an update when the scan revision changed.
func (scanChangedPredicate) Update(e event.UpdateEvent) bool {
	before, ok := e.ObjectOld.(*imagev1.ImageRepository)
	if !ok {
		return false
	}
	after, ok := e.ObjectNew.(*imagev1.ImageRepository)
	if !ok {
		return false
	}
	return scanRevision(before) != scanRevision(after)
}

// firstScanPredicate passes ImageRepository updates that change the Ready
// condition or the suspension of a repository not scanned yet: its
// policies wait quietly for the first scan, and show the repository's
// failure, long wait or suspension (firstScanWait).
type firstScanPredicate struct {
	predicate.Funcs
}

// Update passes an update of an unscanned repository whose Ready condition
// or suspension changed.
func (firstScanPredicate) Update(e event.UpdateEvent) bool {
	before, ok := e.ObjectOld.(*imagev1.ImageRepository)
	if !ok {
		return false
	}
	after, ok := e.ObjectNew.(*imagev1.ImageRepository)
	if !ok || after.Status.LastScanResult != nil {
		return false
	}
	if before.Spec.Suspend != after.Spec.Suspend {
		return true
	}
	was, is := conditions.Get(before, meta.ReadyCondition), conditions.Get(after, meta.ReadyCondition)
	if was == nil || is == nil {
		return was != is
	}
	return was.Status != is.Status || was.Reason != is.Reason || was.Message != is.Message
}

// scanRevision is the tag-list revision of a repository's last scan.
func scanRevision(repo *imagev1.ImageRepository) string {
	if repo.Status.LastScanResult == nil {
		return ""
	}
	return repo.Status.LastScanResult.Revision
}

// latestRefChangedPredicate passes ImagePolicy updates whose latest ref
// changed, and new policies.
type latestRefChangedPredicate struct {
	predicate.Funcs
}

// Update passes an update when latestRef changed.
func (latestRefChangedPredicate) Update(e event.UpdateEvent) bool {
	before, ok := e.ObjectOld.(*imagev1.ImagePolicy)
	if !ok {
		return false
	}
	after, ok := e.ObjectNew.(*imagev1.ImagePolicy)
	if !ok {
		return false
	}
	return refString(before.Status.LatestRef) != refString(after.Status.LatestRef)
}

// latestVersionChangedPredicate passes ReleaseSource updates whose
// status.latest changed (its version or a pinned asset), and new sources.
type latestVersionChangedPredicate struct {
	predicate.Funcs
}

// Update passes an update when status.latest changed.
func (latestVersionChangedPredicate) Update(e event.UpdateEvent) bool {
	before, ok := e.ObjectOld.(*uprevv1.ReleaseSource)
	if !ok {
		return false
	}
	after, ok := e.ObjectNew.(*uprevv1.ReleaseSource)
	if !ok {
		return false
	}
	return !equality.Semantic.DeepEqual(before.Status.Latest, after.Status.Latest)
}

func refString(ref *imagev1.ImageRef) string {
	if ref == nil {
		return ""
	}
	return ref.String()
}

// promotionChangedPredicate passes Sync updates that can change what a
// ReleaseGate promoting from the Sync lets through: a new generation (its
// targets, whether it checks health), a change of its step counts, or, in
// the layout before SyncTargets, of what a target runs or of its health.
// New and deleted Syncs pass too.
type promotionChangedPredicate struct {
	predicate.Funcs
}

// Update passes an update of the spec or of the targets' promotion inputs.
func (promotionChangedPredicate) Update(e event.UpdateEvent) bool {
	before, ok := e.ObjectOld.(*uprevv1.Sync)
	if !ok {
		return false
	}
	after, ok := e.ObjectNew.(*uprevv1.Sync)
	if !ok {
		return false
	}
	if before.Generation != after.Generation {
		return true
	}
	// The targets' state is in their SyncTargets, which the manager does
	// not watch; the Sync's step counts change with it (a target on a new
	// revision, healthy or failed), and a promotion requeues itself for
	// the time healthyFor runs out.
	if !equality.Semantic.DeepEqual(before.Status.Steps, after.Status.Steps) {
		return true
	}
	return !slices.EqualFunc(before.Status.Targets, after.Status.Targets, func(a, b uprevv1.TargetStatus) bool {
		return a.Name == b.Name && a.Healthy == b.Healthy && equality.Semantic.DeepEqual(a.HealthySince, b.HealthySince) &&
			slices.Equal(a.Components, b.Components)
	})
}

// annotationsChangedPredicate passes updates whose annotations changed,
// leaving out those the manager publishes itself (uprevv1.HoldsAnnotation):
// publishing an automation's holds does not run it again, while a person's
// annotation (releasing a hold, requesting a run) does.
type annotationsChangedPredicate struct {
	predicate.Funcs
}

// Update passes an update when an annotation other than a published one
// changed.
func (annotationsChangedPredicate) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return false
	}
	return !maps.Equal(withoutPublished(e.ObjectOld.GetAnnotations()), withoutPublished(e.ObjectNew.GetAnnotations()))
}

// withoutPublished returns annotations without those the manager
// publishes.
func withoutPublished(annotations map[string]string) map[string]string {
	if _, ok := annotations[uprevv1.HoldsAnnotation]; !ok {
		return annotations
	}
	out := maps.Clone(annotations)
	delete(out, uprevv1.HoldsAnnotation)
	return out
}
