package gate_test

import (
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gate"
	"github.com/uprev-dev/uprev/internal/policy"
	"github.com/uprev-dev/uprev/internal/registry"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// image is the image of the policies under test.
const image = "ghcr.io/acme/agent"

// seen returns a tag first seen ago before now.
func seen(tag string, ago time.Duration) registry.SeenTag {
	return registry.SeenTag{Name: tag, FirstSeen: now.Add(-ago)}
}

func semver(rng string) imagev1.ImagePolicyChoice {
	return imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: rng}}
}

func TestSelect(t *testing.T) {
	const day = 24 * time.Hour
	age3d := gate.Gate{Name: "prod", MinReleaseAge: 3 * day}
	tags := []registry.SeenTag{seen("1.3.0", 10*day), seen("1.4.2", 4*day), seen("1.5.0", 2*day), seen("1.5.1", time.Hour), seen("2.0.0", time.Hour)}
	tests := []struct {
		name    string
		choice  imagev1.ImagePolicyChoice
		filter  *imagev1.TagFilter
		tags    []registry.SeenTag
		gates   []gate.Gate
		want    string
		waiting []string
		next    time.Time
		wantErr error
	}{
		{name: "no gates selects as the policy does", choice: semver("1.x"), tags: tags, want: "1.5.1"},
		{name: "a zero age holds nothing", choice: semver("1.x"), tags: tags, gates: []gate.Gate{{Name: "g"}}, want: "1.5.1"},
		{name: "falls back to the newest old enough", choice: semver("1.x"), tags: tags, gates: []gate.Gate{age3d},
			want: "1.4.2", waiting: []string{"1.5.1", "1.5.0"}, next: now.Add(day)},
		{name: "waiting is bounded by the range", choice: semver("<1.5.1"), tags: tags, gates: []gate.Gate{age3d},
			want: "1.4.2", waiting: []string{"1.5.0"}, next: now.Add(day)},
		{name: "the strictest gate decides", choice: semver("1.x"), tags: tags,
			gates: []gate.Gate{age3d, {Name: "soak", MinReleaseAge: 5 * day}}, want: "1.3.0", waiting: []string{"1.5.1", "1.5.0", "1.4.2"}, next: now.Add(day)},
		{name: "every version held: nothing selected, all wait", choice: semver("1.x"), tags: tags, gates: []gate.Gate{{Name: "g", MinReleaseAge: 30 * day}},
			waiting: []string{"1.5.1", "1.5.0", "1.4.2", "1.3.0"}, next: now.Add(20 * day)},
		{name: "a tag exactly old enough passes", choice: semver("1.x"), tags: []registry.SeenTag{seen("1.0.0", 3*day)}, gates: []gate.Gate{age3d}, want: "1.0.0"},
		{name: "filter and extract", choice: imagev1.ImagePolicyChoice{Numerical: &imagev1.NumericalPolicy{}},
			filter: &imagev1.TagFilter{Pattern: `^main-(?P<ts>\d+)$`, Extract: "$ts"},
			tags:   []registry.SeenTag{seen("main-100", 5*day), seen("main-200", day), seen("pr-300", 10*day)}, gates: []gate.Gate{age3d},
			want: "main-100", waiting: []string{"main-200"}, next: now.Add(2 * day)},
		{name: "nothing matches at all", choice: semver("3.x"), tags: tags, gates: []gate.Gate{age3d}, wantErr: policy.ErrNoMatch},
		{name: "an invalid policy", choice: semver("not a range"), tags: tags, gates: []gate.Gate{age3d}, wantErr: policy.ErrInvalidPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := gate.Select(tt.choice, tt.filter, image, tt.tags, tt.gates, now)
			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Tag).To(Equal(tt.want))
			var waiting []string
			for _, w := range got.Waiting {
				waiting = append(waiting, w.Tag)
				g.Expect(w.EligibleAt()).To(BeTemporally(">", now))
				g.Expect(w.Holds[0].Kind).To(Equal(gate.MinReleaseAge))
			}
			g.Expect(waiting).To(Equal(tt.waiting))
			g.Expect(got.NextEligibleAt).To(Equal(tt.next))
		})
	}
}

func TestSelectHoldsNameEveryGate(t *testing.T) {
	g := NewWithT(t)
	got, err := gate.Select(semver("1.x"), nil, image, []registry.SeenTag{seen("1.0.0", 10*time.Hour), seen("1.1.0", time.Hour)},
		[]gate.Gate{{Name: "short", MinReleaseAge: 2 * time.Hour}, {Name: "long", MinReleaseAge: 5 * time.Hour}}, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Tag).To(Equal("1.0.0"))
	g.Expect(got.Waiting).To(HaveLen(1))
	w := got.Waiting[0]
	g.Expect(w.Holds).To(HaveLen(2))
	g.Expect(w.Holds[0].Gate).To(Equal("long"), "the gate that lets it through last comes first")
	g.Expect(w.EligibleAt()).To(Equal(now.Add(4 * time.Hour)))
	g.Expect(w.Holds[1].Gate).To(Equal("short"))
	g.Expect(w.Holds[1].EligibleAt).To(Equal(now.Add(time.Hour)))
	g.Expect(got.NextEligibleAt).To(Equal(now.Add(4*time.Hour)), "the version is eligible once every gate lets it through")
}

func TestSelectListsAtMostMaxWaiting(t *testing.T) {
	g := NewWithT(t)
	var tags []registry.SeenTag
	for i := range 300 {
		tags = append(tags, seen("1.0."+itoa(i), time.Duration(300-i)*time.Minute))
	}
	got, err := gate.Select(semver(">=1.0.0"), nil, image, tags, []gate.Gate{{Name: "g", MinReleaseAge: 150 * time.Minute}}, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Tag).To(Equal("1.0.150"), "the selection is exact however many versions wait")
	g.Expect(got.Waiting).To(HaveLen(gate.MaxWaiting))
	g.Expect(got.Waiting[0].Tag).To(Equal("1.0.299"))
	g.Expect(got.NextEligibleAt).To(Equal(now.Add(time.Minute)), "the next eligible version counts even when it is not listed")
}
