package controllers

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
)

func TestPromotionTargets(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	staging := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "staging"},
		Spec:       uprevv1.SyncSpec{Wait: true, Targets: []uprevv1.Target{{Name: "eu-staging"}, {Name: "us-staging"}, {Name: "new"}}},
		Status: uprevv1.SyncStatus{Targets: []uprevv1.TargetStatus{
			{Name: "eu-staging", Healthy: true, HealthySince: &since, Components: []uprevv1.AppliedComponent{{Image: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: "sha256:a"}}},
			{Name: "us-staging", Healthy: false, Components: []uprevv1.AppliedComponent{{Image: "ghcr.io/acme/agent", Tag: "1.4.2"}}},
		}},
	}
	noWait := staging.DeepCopy()
	noWait.Spec.Wait = false
	for _, tc := range []struct {
		name       string
		sync       *uprevv1.Sync
		names      []string
		want       []gate.Target
		wantReason string
	}{
		{name: "all targets by default, in the Sync's order", sync: staging, want: []gate.Target{
			{Name: "eu-staging", HealthySince: since.Time, Components: []gate.Component{{Image: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: "sha256:a"}}},
			{Name: "us-staging", Components: []gate.Component{{Image: "ghcr.io/acme/agent", Tag: "1.4.2"}}},
			{Name: "new"},
		}},
		{name: "the listed targets", sync: staging, names: []string{"eu-staging"}, want: []gate.Target{
			{Name: "eu-staging", HealthySince: since.Time, Components: []gate.Component{{Image: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: "sha256:a"}}},
		}},
		{name: "a target the Sync does not have", sync: staging, names: []string{"eu-staging", "ap-staging"}, wantReason: uprevv1.PromotionTargetNotFoundReason},
		{name: "a Sync that never checks health", sync: noWait, wantReason: uprevv1.PromotionNeverHealthyReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			statuses := map[string]uprevv1.TargetStatus{}
			for _, ts := range tc.sync.Status.Targets {
				statuses[ts.Name] = ts
			}
			got, err := promotionTargets(tc.sync, statuses, tc.names)
			if tc.wantReason != "" {
				var d *degradedError
				g.Expect(errors.As(err, &d)).To(BeTrue(), "%v", err)
				g.Expect(d.reason).To(Equal(tc.wantReason))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestWaitText(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		hold gate.Hold
		want string
	}{
		{gate.Hold{Gate: "prod", Kind: gate.MinReleaseAge, EligibleAt: at, Reason: "young"}, "1.5.1 waits for minReleaseAge until 2026-11-26T12:00:00Z (ReleaseGate prod)"},
		{gate.Hold{Gate: "prod", Kind: gate.Promotion, Reason: "eu-staging runs 1.4.2"}, "1.5.1 waits for promotion: eu-staging runs 1.4.2 (ReleaseGate prod)"},
		{gate.Hold{Gate: "prod", Kind: gate.Promotion, EligibleAt: at, Reason: "eu-staging healthy on 1.5.1 since …"},
			"1.5.1 waits for promotion until 2026-11-26T12:00:00Z: eu-staging healthy on 1.5.1 since … (ReleaseGate prod)"},
	} {
		NewWithT(t).Expect(waitText("1.5.1", tc.hold)).To(Equal(tc.want))
	}
}
