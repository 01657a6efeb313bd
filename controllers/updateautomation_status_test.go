package controllers

import (
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/update"
)

// TestAutomationStatus shows that status follows what a run found however
// far it got: a phase that ran replaces what an earlier run found, one that
// did not keeps it.
func TestAutomationStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	earlier := metav1.NewTime(now.Add(-time.Hour))
	key := update.PolicyKey{Namespace: "fleet", Name: "agent"}
	prev := uprevv1.UpdateAutomationStatus{
		ObservedPolicies:  map[string]uprevv1.ImageRef{"agent": {Name: "acme/agent", Tag: "1.0.0"}},
		Holds:             []uprevv1.Hold{{Policy: "fleet/agent", Version: "1.1.0", RevertedIn: "abc"}},
		RefusedDowngrades: []uprevv1.RefusedDowngrade{{Policy: "fleet/agent", File: "a.yaml", Current: "2.0.0", Selected: "1.0.0"}},
		CRDs:              []uprevv1.CRDBundleStatus{{Policy: "fleet/operator", Path: "crds", Version: "1.0.0", CRDs: 2}},
		LastPushCommit:    "old",
		LastPushTime:      &earlier,
	}
	policies := map[update.PolicyKey]*imagev1.ImagePolicy{key: {Status: imagev1.ImagePolicyStatus{
		LatestRef: &imagev1.ImageRef{Name: "acme/agent", Tag: "1.2.0", Digest: "sha256:12"},
	}}}
	noHolds := guard.New(guard.Input{})
	downgrade := update.Result{Refused: []update.Refusal{{
		Change: update.Change{File: "b.yaml", Policy: key, Old: update.Ref{Tag: "3.0.0"}, New: update.Ref{Tag: "1.2.0"}},
		Reason: &guard.Refusal{Kind: guard.RefusalDowngrade, Policy: key, Current: "3.0.0", Selected: "1.2.0"},
	}}}
	for _, tc := range []struct {
		name string
		run  automationRun
		want func(*uprevv1.UpdateAutomationStatus)
	}{
		{name: "failed before anything: status as it was", want: func(*uprevv1.UpdateAutomationStatus) {}},
		{name: "failed fetching: observed policies only", run: automationRun{policies: policies}, want: func(st *uprevv1.UpdateAutomationStatus) {
			st.ObservedPolicies = map[string]uprevv1.ImageRef{"agent": {Name: "acme/agent", Tag: "1.2.0", Digest: "sha256:12"}}
		}},
		{name: "refused CRD artifact: holds read, downgrades kept", run: automationRun{policies: policies, rules: noHolds}, want: func(st *uprevv1.UpdateAutomationStatus) {
			st.ObservedPolicies = map[string]uprevv1.ImageRef{"agent": {Name: "acme/agent", Tag: "1.2.0", Digest: "sha256:12"}}
			st.Holds = nil
			st.CRDs = prev.CRDs
		}},
		{name: "push rejected: everything but the push", run: automationRun{policies: policies, rules: noHolds, crdsRead: true, rewritten: true, result: downgrade}, want: func(st *uprevv1.UpdateAutomationStatus) {
			st.ObservedPolicies = map[string]uprevv1.ImageRef{"agent": {Name: "acme/agent", Tag: "1.2.0", Digest: "sha256:12"}}
			st.Holds = nil
			st.RefusedDowngrades = []uprevv1.RefusedDowngrade{{Policy: "fleet/agent", File: "b.yaml", Current: "3.0.0", Selected: "1.2.0"}}
			st.CRDs = nil
		}},
		{name: "nothing new: CRD status and refused downgrades as the last full run left them", run: automationRun{
			policies: policies, rules: noHolds, crdsRead: true, unchanged: true, revisions: revisions{source: "main@sha1:aaa"},
		}, want: func(st *uprevv1.UpdateAutomationStatus) {
			st.ObservedPolicies = map[string]uprevv1.ImageRef{"agent": {Name: "acme/agent", Tag: "1.2.0", Digest: "sha256:12"}}
			st.Holds = nil
			st.ObservedSourceRevision = "main@sha1:aaa"
		}},
		{name: "pushed", run: automationRun{policies: policies, rules: noHolds, crdsRead: true, rewritten: true, commit: "new",
			revisions: revisions{source: "main@sha1:aaa", push: "uprev/updates@sha1:new"}}, want: func(st *uprevv1.UpdateAutomationStatus) {
			st.ObservedSourceRevision = "main@sha1:aaa"
			st.ObservedPushRevision = "uprev/updates@sha1:new"
			st.ObservedPolicies = map[string]uprevv1.ImageRef{"agent": {Name: "acme/agent", Tag: "1.2.0", Digest: "sha256:12"}}
			st.Holds = nil
			st.RefusedDowngrades = nil
			st.CRDs = nil
			st.LastPushCommit = "new"
			st.LastPushTime = &now
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			want := *prev.DeepCopy()
			tc.want(&want)
			got := automationStatus(prev, &tc.run, now)
			g.Expect(got).To(Equal(want))
			g.Expect(prev.LastPushCommit).To(Equal("old"), "the previous status is not changed in place")
		})
	}
}
