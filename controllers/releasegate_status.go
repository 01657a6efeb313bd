package controllers

import (
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
)

// withWaiting adds to gp the versions of sel that the gate named name
// holds back, newest first and at most uprevv1.MaxWaitingVersions, and
// returns the earliest time this gate lets one of them through (zero when
// no time will by itself).
func withWaiting(gp uprevv1.GatedPolicy, name string, sel gate.Selection) (uprevv1.GatedPolicy, time.Time) {
	var next time.Time
	for _, w := range sel.Waiting {
		for _, h := range w.Holds {
			if h.Gate != name {
				continue
			}
			if !h.EligibleAt.IsZero() && (next.IsZero() || h.EligibleAt.Before(next)) {
				next = h.EligibleAt
			}
			if len(gp.Waiting) < uprevv1.MaxWaitingVersions {
				wv := uprevv1.WaitingVersion{Tag: w.Tag, Gate: h.Kind, Reason: h.Reason}
				if !h.EligibleAt.IsZero() && h.Kind != gate.Verify && h.Kind != gate.Attestations {
					at := metav1.NewTime(h.EligibleAt)
					wv.EligibleAt = &at
				}
				gp.Waiting = append(gp.Waiting, wv)
			}
		}
	}
	return gp, next
}

// released returns the version that waited at this gate for the policy of
// now, as the gate's status before listed it, and that the gates now let
// the policy select: a release, reported once since the status written
// after it no longer lists the version as waiting. It returns nil when
// nothing was released.
func released(before []uprevv1.GatedPolicy, now uprevv1.GatedPolicy, selected string) *uprevv1.WaitingVersion {
	if selected == "" || slices.ContainsFunc(now.Waiting, func(w uprevv1.WaitingVersion) bool { return w.Tag == selected }) {
		return nil
	}
	i := slices.IndexFunc(before, func(gp uprevv1.GatedPolicy) bool { return gp.Name == now.Name })
	if i < 0 {
		return nil
	}
	j := slices.IndexFunc(before[i].Waiting, func(w uprevv1.WaitingVersion) bool { return w.Tag == selected })
	if j < 0 {
		return nil
	}
	return &before[i].Waiting[j]
}

// gatedPolicyKey names one policy of one ReleaseGate.
type gatedPolicyKey struct {
	gate   types.NamespacedName
	policy string
}

// releases keeps, per policy of a ReleaseGate, the release last announced
// (tag and digest), so that a release is announced once even when the
// gate's status read from the cache is older than the one written after
// the announcement (released would find the version waiting again).
type releases struct {
	mu   sync.Mutex
	last map[gatedPolicyKey]gate.Selection
}

// first records the release of sel for key and tells whether it is new:
// not the release last announced for key.
func (r *releases) first(key gatedPolicyKey, sel gate.Selection) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, ok := r.last[key]; ok && last.Tag == sel.Tag && last.Digest == sel.Digest {
		return false
	}
	if r.last == nil {
		r.last = map[gatedPolicyKey]gate.Selection{}
	}
	r.last[key] = gate.Selection{Tag: sel.Tag, Digest: sel.Digest}
	return true
}

// waitingAgain forgets the release announced for key when its version
// waits again (a revert in staging, a moved tag): its next release is new.
func (r *releases) waitingAgain(key gatedPolicyKey, waiting []uprevv1.WaitingVersion) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, ok := r.last[key]; ok && slices.ContainsFunc(waiting, func(w uprevv1.WaitingVersion) bool { return w.Tag == last.Tag }) {
		delete(r.last, key)
	}
}

// forgetGate forgets the releases of a deleted ReleaseGate.
func (r *releases) forgetGate(g types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key := range r.last {
		if key.gate == g {
			delete(r.last, key)
		}
	}
}
