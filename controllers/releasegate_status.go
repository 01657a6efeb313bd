package controllers

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
				if !h.EligibleAt.IsZero() && h.Kind != gate.Verify {
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
