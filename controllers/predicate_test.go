package controllers

import (
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

func TestScanChangedPredicate(t *testing.T) {
	repo := func(revision string) *imagev1.ImageRepository {
		r := &imagev1.ImageRepository{}
		if revision != "" {
			r.Status.LastScanResult = &imagev1.ScanResult{Revision: revision}
		}
		return r
	}
	for _, tc := range []struct {
		name          string
		before, after *imagev1.ImageRepository
		want          bool
	}{
		{name: "first scan", before: repo(""), after: repo("sha256:a"), want: true},
		{name: "tags changed", before: repo("sha256:a"), after: repo("sha256:b"), want: true},
		{name: "same tags", before: repo("sha256:a"), after: repo("sha256:a"), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(scanChangedPredicate{}.Update(event.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after})).To(Equal(tc.want))
		})
	}
}

func TestFirstScanPredicate(t *testing.T) {
	repo := func(scanned, suspended bool, ready ...metav1.Condition) *imagev1.ImageRepository {
		r := &imagev1.ImageRepository{Spec: imagev1.ImageRepositorySpec{Suspend: suspended}}
		if scanned {
			r.Status.LastScanResult = &imagev1.ScanResult{Revision: "sha256:a"}
		}
		r.Status.Conditions = ready
		return r
	}
	busy := metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: registryBusyReason, Message: "waiting"}
	failed := metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: imagev1.ReadOperationFailedReason, Message: "refused"}
	failedAgain := failed
	failedAgain.Message = "timed out"
	for _, tc := range []struct {
		name          string
		before, after *imagev1.ImageRepository
		want          bool
	}{
		{name: "first report of a wait", before: repo(false, false), after: repo(false, false, busy), want: true},
		{name: "wait became a failure", before: repo(false, false, busy), after: repo(false, false, failed), want: true},
		{name: "another failure", before: repo(false, false, failed), after: repo(false, false, failedAgain), want: true},
		{name: "suspended", before: repo(false, false), after: repo(false, true), want: true},
		{name: "nothing changed", before: repo(false, false, failed), after: repo(false, false, failed), want: false},
		{name: "scanned: scanChangedPredicate's", before: repo(false, false, failed), after: repo(true, false), want: false},
		{name: "failing after a scan", before: repo(true, false), after: repo(true, false, failed), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(firstScanPredicate{}.Update(event.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after})).To(Equal(tc.want))
		})
	}
}

func TestLatestRefChangedPredicate(t *testing.T) {
	policy := func(ref *imagev1.ImageRef) *imagev1.ImagePolicy {
		return &imagev1.ImagePolicy{Status: imagev1.ImagePolicyStatus{LatestRef: ref}}
	}
	v1 := &imagev1.ImageRef{Name: "ghcr.io/acme/agent", Tag: "1.0.0"}
	v2 := &imagev1.ImageRef{Name: "ghcr.io/acme/agent", Tag: "1.1.0"}
	v1Pinned := &imagev1.ImageRef{Name: "ghcr.io/acme/agent", Tag: "1.0.0", Digest: "sha256:aa"}
	for _, tc := range []struct {
		name          string
		before, after *imagev1.ImagePolicy
		want          bool
	}{
		{name: "first selection", before: policy(nil), after: policy(v1), want: true},
		{name: "new tag", before: policy(v1), after: policy(v2), want: true},
		{name: "digest found", before: policy(v1), after: policy(v1Pinned), want: true},
		{name: "unchanged", before: policy(v1), after: policy(v1), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(latestRefChangedPredicate{}.Update(event.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after})).To(Equal(tc.want))
		})
	}
}

func TestPromotionChangedPredicate(t *testing.T) {
	since := metav1.Now()
	sync := func(generation int64, mutate ...func(*uprevv1.TargetStatus)) *uprevv1.Sync {
		ts := uprevv1.TargetStatus{Name: "eu-staging", LastAppliedRevision: "main@sha1:1", Healthy: true, HealthySince: &since,
			Components: []uprevv1.AppliedComponent{{Image: "ghcr.io/acme/agent", Tag: "1.4.2"}}, Message: "applied 3 objects"}
		for _, m := range mutate {
			m(&ts)
		}
		s := &uprevv1.Sync{Status: uprevv1.SyncStatus{Targets: []uprevv1.TargetStatus{ts}}}
		s.Generation = generation
		return s
	}
	for _, tc := range []struct {
		name   string
		before *uprevv1.Sync
		after  *uprevv1.Sync
		want   bool
	}{
		{name: "nothing that promotes changed", before: sync(1), after: sync(1, func(ts *uprevv1.TargetStatus) { ts.Message = "applied 4 objects" }), want: false},
		{name: "the spec changed", before: sync(1), after: sync(2), want: true},
		{name: "a target runs another version", before: sync(1), after: sync(1, func(ts *uprevv1.TargetStatus) { ts.Components[0].Tag = "1.5.0" }), want: true},
		{name: "a target turned unhealthy", before: sync(1), after: sync(1, func(ts *uprevv1.TargetStatus) { ts.Healthy, ts.HealthySince = false, nil }), want: true},
		{name: "a target is healthy anew", before: sync(1), after: sync(1, func(ts *uprevv1.TargetStatus) { ts.HealthySince = &metav1.Time{Time: since.Add(1e9)} }), want: true},
		{name: "a target appeared", before: &uprevv1.Sync{}, after: sync(0), want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(promotionChangedPredicate{}.Update(event.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after})).To(Equal(tc.want))
		})
	}
}

func TestAnnotationsChangedPredicate(t *testing.T) {
	annotated := func(annotations map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
	}
	release := map[string]string{uprevv1.HoldReleaseAnnotation: "fleet/agent 1.1.0"}
	published := map[string]string{uprevv1.HoldsAnnotation: `{"holds":[]}`}
	both := map[string]string{uprevv1.HoldReleaseAnnotation: "fleet/agent 1.1.0", uprevv1.HoldsAnnotation: `{"holds":[]}`}
	for _, tc := range []struct {
		name          string
		before, after map[string]string
		want          bool
	}{
		{name: "hold released", before: nil, after: release, want: true},
		{name: "release removed", before: both, after: published, want: true},
		{name: "holds published", before: nil, after: published, want: false},
		{name: "holds published beside a release", before: release, after: both, want: false},
		{name: "published holds removed", before: both, after: release, want: false},
		{name: "unchanged", before: release, after: release, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(annotationsChangedPredicate{}.Update(event.UpdateEvent{ObjectOld: annotated(tc.before), ObjectNew: annotated(tc.after)})).To(Equal(tc.want))
		})
	}
}
