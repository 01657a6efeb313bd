package controllers

import (
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/event"
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
