package gate_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gate"
	"github.com/uprev-dev/uprev/internal/registry"
)

// runs is a target healthy since healthyAgo before now (never when
// negative) that runs the given tags of image, and another image's 9.9.9.
func runs(name string, healthyAgo time.Duration, tags ...string) gate.Target {
	t := gate.Target{Name: name, Components: []gate.Component{{Image: "ghcr.io/acme/other", Tag: "9.9.9"}}}
	for _, tag := range tags {
		t.Components = append(t.Components, gate.Component{Image: image, Tag: tag, Digest: "sha256:" + tag})
	}
	if healthyAgo >= 0 {
		t.HealthySince = now.Add(-healthyAgo)
	}
	return t
}

// promotion is the gate prod promoting from Sync staging's targets.
func promotion(healthyFor time.Duration, targets ...gate.Target) gate.Gate {
	return gate.Gate{Name: "prod", Promotion: &gate.PromotionGate{Sync: "staging", Targets: targets, HealthyFor: healthyFor}}
}

func TestSelectPromotion(t *testing.T) {
	const day = 24 * time.Hour
	tags := []registry.SeenTag{seen("1.3.0", 10*day), seen("1.4.2", 4*day), seen("1.5.0", 2*day), seen("1.5.1", time.Hour)}
	tests := []struct {
		name    string
		gates   []gate.Gate
		want    string
		waiting []string
		reason  string
		next    time.Time
	}{
		{name: "staging healthy long enough on the newest", gates: []gate.Gate{promotion(day, runs("eu-staging", 2*day, "1.5.1"))}, want: "1.5.1"},
		{name: "healthy once is enough without healthyFor", gates: []gate.Gate{promotion(0, runs("eu-staging", 0, "1.5.1"))}, want: "1.5.1"},
		{name: "not healthy for long enough: waits until it is", gates: []gate.Gate{promotion(day, runs("eu-staging", time.Hour, "1.5.1"))},
			waiting: []string{"1.5.1", "1.5.0", "1.4.2", "1.3.0"}, reason: "eu-staging healthy on 1.5.1 since 2026-11-25T11:00:00Z, for less than 24h0m0s", next: now.Add(23 * time.Hour)},
		{name: "staging unhealthy stops it", gates: []gate.Gate{promotion(day, runs("eu-staging", -1, "1.5.1"))},
			waiting: []string{"1.5.1", "1.5.0", "1.4.2", "1.3.0"}, reason: "eu-staging runs 1.5.1 but is not healthy"},
		{name: "a revert in staging takes the promotion back", gates: []gate.Gate{promotion(day, runs("eu-staging", 3*day, "1.4.2"))},
			want: "1.4.2", waiting: []string{"1.5.1", "1.5.0"}, reason: "eu-staging runs 1.4.2"},
		{name: "every listed target must run it", gates: []gate.Gate{promotion(day, runs("eu-staging", 3*day, "1.5.0", "1.5.1"), runs("us-staging", 3*day, "1.5.0"))},
			want: "1.5.0", waiting: []string{"1.5.1"}, reason: "us-staging runs 1.5.0"},
		{name: "the last target healthy long enough decides when", gates: []gate.Gate{promotion(day, runs("eu-staging", 20*time.Hour, "1.5.1"), runs("us-staging", 2*time.Hour, "1.5.1"))},
			waiting: []string{"1.5.1", "1.5.0", "1.4.2", "1.3.0"}, reason: "us-staging healthy on 1.5.1 since 2026-11-25T10:00:00Z, for less than 24h0m0s", next: now.Add(22 * time.Hour)},
		{name: "a target running two versions passes both", gates: []gate.Gate{promotion(0, runs("eu-staging", time.Hour, "1.5.0", "1.4.2"))}, want: "1.5.0", waiting: []string{"1.5.1"}, reason: "eu-staging runs 1.5.0, 1.4.2"},
		{name: "a target that applied nothing", gates: []gate.Gate{promotion(0, gate.Target{Name: "eu-staging"})},
			waiting: []string{"1.5.1", "1.5.0", "1.4.2", "1.3.0"}, reason: "eu-staging of Sync staging has applied nothing healthy yet"},
		{name: "a target running other images only", gates: []gate.Gate{promotion(0, runs("eu-staging", time.Hour))},
			waiting: []string{"1.5.1", "1.5.0", "1.4.2", "1.3.0"}, reason: "eu-staging runs no version of ghcr.io/acme/agent"},
		{name: "promotion and age together: a promoted version still waits for its age",
			gates: []gate.Gate{promotion(0, runs("eu-staging", time.Hour, "1.5.1", "1.4.2")), {Name: "age", MinReleaseAge: 3 * day}},
			want:  "1.4.2", waiting: []string{"1.5.1", "1.5.0"}, reason: "first seen", next: now.Add(3*day - time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := gate.Select(semver("1.x"), nil, image, tags, tt.gates, now)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Tag).To(Equal(tt.want))
			var waiting []string
			for _, w := range got.Waiting {
				waiting = append(waiting, w.Tag)
			}
			g.Expect(waiting).To(Equal(tt.waiting))
			if len(tt.waiting) > 0 {
				g.Expect(got.Waiting[0].Holds[0].Reason).To(ContainSubstring(tt.reason))
			}
			g.Expect(got.NextEligibleAt).To(Equal(tt.next))
		})
	}
}

func TestSelectPromotionMatchesImagesByCanonicalName(t *testing.T) {
	g := NewWithT(t)
	staging := gate.Target{Name: "staging", HealthySince: now.Add(-time.Hour), Components: []gate.Component{{Image: "docker.io/library/nginx", Tag: "1.27.0"}}}
	got, err := gate.Select(semver("1.x"), nil, "nginx", []registry.SeenTag{seen("1.27.0", time.Hour), seen("1.27.1", time.Minute)}, []gate.Gate{promotion(0, staging)}, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Tag).To(Equal("1.27.0"))
}

func TestSelectionDigestHold(t *testing.T) {
	g := NewWithT(t)
	noDigest := gate.Target{Name: "us-staging", HealthySince: now.Add(-time.Hour), Components: []gate.Component{{Image: image, Tag: "1.5.1"}}}
	got, err := gate.Select(semver("1.x"), nil, image, []registry.SeenTag{seen("1.5.1", time.Hour)},
		[]gate.Gate{promotion(0, runs("eu-staging", time.Hour, "1.5.1"), noDigest)}, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Tag).To(Equal("1.5.1"))

	_, held := got.DigestHold("sha256:1.5.1")
	g.Expect(held).To(BeFalse(), "the digest staging runs")
	_, held = got.DigestHold("")
	g.Expect(held).To(BeFalse(), "a policy that reflects no digest is promoted by tag")
	h, held := got.DigestHold("sha256:moved")
	g.Expect(held).To(BeTrue(), "the tag moved after staging took it")
	g.Expect(h.Kind).To(Equal(gate.Promotion))
	g.Expect(h.Reason).To(Equal("eu-staging runs 1.5.1 at sha256:1.5.1, the tag now points at sha256:moved"))
}
