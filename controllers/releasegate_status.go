package controllers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
)

// withWaiting adds to gp the versions of sel that the gate named name
// holds back, newest first and at most uprevv1.MaxWaitingVersions, and
// returns the earliest time this gate lets one of them through.
func withWaiting(gp uprevv1.GatedPolicy, name string, sel gate.Selection) (uprevv1.GatedPolicy, time.Time) {
	var next time.Time
	for _, w := range sel.Waiting {
		for _, h := range w.Holds {
			if h.Gate != name {
				continue
			}
			if next.IsZero() || h.EligibleAt.Before(next) {
				next = h.EligibleAt
			}
			if len(gp.Waiting) < uprevv1.MaxWaitingVersions {
				wv := uprevv1.WaitingVersion{Tag: w.Tag, Gate: h.Kind, Reason: h.Reason}
				if h.Kind != gate.Verify {
					at := metav1.NewTime(h.EligibleAt)
					wv.EligibleAt = &at
				}
				gp.Waiting = append(gp.Waiting, wv)
			}
		}
	}
	return gp, next
}
