package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
)

func TestWithWaitingListsThisGatesHoldsOnly(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	hold := func(name string, at time.Duration) gate.Hold {
		return gate.Hold{Gate: name, Kind: gate.MinReleaseAge, EligibleAt: t0.Add(at), Reason: "young"}
	}
	many := gate.Selection{Tag: "1.0.0"}
	for i := range 30 {
		many.Waiting = append(many.Waiting, gate.Waiting{Tag: "1.1." + string(rune('a'+i)), Holds: []gate.Hold{hold("prod", time.Duration(30-i)*time.Hour)}})
	}
	tests := []struct {
		name     string
		sel      gate.Selection
		wantTags []string
		wantLen  int
		wantNext time.Time
	}{
		{name: "nothing waits", sel: gate.Selection{Tag: "1.0.0"}},
		{name: "held by this gate and another", sel: gate.Selection{Tag: "1.0.0", Waiting: []gate.Waiting{
			{Tag: "1.2.0", Holds: []gate.Hold{hold("soak", 5*time.Hour), hold("prod", 2*time.Hour)}},
			{Tag: "1.1.0", Holds: []gate.Hold{hold("soak", time.Hour)}},
		}}, wantTags: []string{"1.2.0"}, wantLen: 1, wantNext: t0.Add(2 * time.Hour)},
		{name: "bounded, newest first, the next eligible still counted", sel: many,
			wantTags: []string{"1.1.a", "1.1.b"}, wantLen: uprevv1.MaxWaitingVersions, wantNext: t0.Add(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			gp, next := withWaiting(uprevv1.GatedPolicy{Name: "agent"}, "prod", tt.sel)
			g.Expect(next).To(Equal(tt.wantNext))
			g.Expect(gp.Waiting).To(HaveLen(tt.wantLen))
			for i, tag := range tt.wantTags {
				g.Expect(gp.Waiting[i].Tag).To(Equal(tag))
				g.Expect(gp.Waiting[i].Gate).To(Equal(gate.MinReleaseAge))
				g.Expect(gp.Waiting[i].EligibleAt).NotTo(BeNil())
			}
		})
	}
}

func TestWithWaitingPromotionHasNoEligibleTime(t *testing.T) {
	g := NewWithT(t)
	sel := gate.Selection{Tag: "1.4.2", Waiting: []gate.Waiting{{Tag: "1.5.0", Holds: []gate.Hold{{Gate: "prod", Kind: gate.Promotion, Reason: "eu-staging runs 1.4.2"}}}}}
	gp, next := withWaiting(uprevv1.GatedPolicy{Name: "agent"}, "prod", sel)
	g.Expect(next.IsZero()).To(BeTrue(), "no time lets it through by itself")
	g.Expect(gp.Waiting).To(Equal([]uprevv1.WaitingVersion{{Tag: "1.5.0", Gate: "promotion", Reason: "eu-staging runs 1.4.2"}}))
}

func TestReleased(t *testing.T) {
	waits := func(tags ...string) []uprevv1.GatedPolicy {
		gp := uprevv1.GatedPolicy{Name: "agent"}
		for _, tag := range tags {
			gp.Waiting = append(gp.Waiting, uprevv1.WaitingVersion{Tag: tag, Gate: "promotion"})
		}
		return []uprevv1.GatedPolicy{gp}
	}
	for _, tc := range []struct {
		name     string
		before   []uprevv1.GatedPolicy
		now      uprevv1.GatedPolicy
		selected string
		want     string
	}{
		{name: "the waiting version is selected", before: waits("1.5.1", "1.5.0"), now: waits("1.5.1")[0], selected: "1.5.0", want: "1.5.0"},
		{name: "reported once: the status no longer lists it", before: waits("1.5.1"), now: waits("1.5.1")[0], selected: "1.5.0"},
		{name: "still waiting", before: waits("1.5.0"), now: waits("1.5.0")[0], selected: "1.4.2"},
		{name: "a policy new to the gate", now: waits()[0], selected: "1.5.0"},
		{name: "nothing selectable", before: waits("1.5.0"), now: waits()[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := released(tc.before, tc.now, tc.selected)
			if tc.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Tag).To(Equal(tc.want))
		})
	}
}

// TestReleasesAreAnnouncedOnce: a second reconcile that reads the gate's
// status from before the announcement does not announce it again; a
// version that waits again (a moved tag) is announced when released anew.
func TestReleasesAreAnnouncedOnce(t *testing.T) {
	g := NewWithT(t)
	var r releases
	key := gatedPolicyKey{gate: types.NamespacedName{Namespace: "apps", Name: "prod"}, policy: "agent"}
	other := gatedPolicyKey{gate: types.NamespacedName{Namespace: "apps", Name: "prod"}, policy: "web"}
	g.Expect(r.first(key, gate.Selection{Tag: "1.1.0", Digest: "sha256:a"})).To(BeTrue())
	g.Expect(r.first(key, gate.Selection{Tag: "1.1.0", Digest: "sha256:a"})).To(BeFalse(), "a stale status")
	g.Expect(r.first(other, gate.Selection{Tag: "1.1.0", Digest: "sha256:a"})).To(BeTrue())

	r.waitingAgain(key, []uprevv1.WaitingVersion{{Tag: "1.2.0"}})
	g.Expect(r.first(key, gate.Selection{Tag: "1.1.0", Digest: "sha256:a"})).To(BeFalse(), "1.1.0 does not wait again")
	r.waitingAgain(key, []uprevv1.WaitingVersion{{Tag: "1.1.0"}})
	g.Expect(r.first(key, gate.Selection{Tag: "1.1.0", Digest: "sha256:b"})).To(BeTrue())
	g.Expect(r.first(key, gate.Selection{Tag: "1.2.0", Digest: "sha256:c"})).To(BeTrue())

	r.forgetGate(key.gate)
	g.Expect(r.last).To(BeEmpty())
}
