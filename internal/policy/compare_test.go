package policy_test

import (
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/policy"
)

func TestCompare(t *testing.T) {
	tests := []struct {
		name    string
		choice  imagev1.ImagePolicyChoice
		filter  *imagev1.TagFilter
		a, b    string
		want    int
		wantErr error
	}{
		{name: "semver higher", choice: semverChoice("*"), a: "1.10.0", b: "1.9.0", want: 1},
		{name: "semver lower", choice: semverChoice("*"), a: "1.9.0", b: "1.10.0", want: -1},
		{name: "semver equal across v prefix", choice: semverChoice("*"), a: "v1.2.3", b: "1.2.3", want: 0},
		{name: "semver metadata ignored", choice: semverChoice("*"), a: "1.2.3+a", b: "1.2.3+b", want: 0},
		{name: "semver prerelease below release", choice: semverChoice(">=1.0.0"), a: "2.0.0-rc.1", b: "2.0.0", want: -1},
		{name: "semver range not applied", choice: semverChoice(">=1.0.0 <2.0.0"), a: "2.5.0", b: "1.9.0", want: 1},
		{name: "semver not a version", choice: semverChoice("*"), a: "latest", b: "1.0.0", wantErr: policy.ErrInvalidTag},
		{name: "semver second not a version", choice: semverChoice("*"), a: "1.0.0", b: "1.0", wantErr: policy.ErrInvalidTag},
		{name: "semver bad range", choice: semverChoice("nope"), a: "1.0.0", b: "1.0.0", wantErr: policy.ErrInvalidPolicy},
		{name: "alphabetical asc", choice: alphabeticalChoice(""), a: "b", b: "a", want: 1},
		{name: "alphabetical desc", choice: alphabeticalChoice("desc"), a: "b", b: "a", want: -1},
		{name: "alphabetical equal", choice: alphabeticalChoice("desc"), a: "x", b: "x", want: 0},
		{name: "alphabetical bad order", choice: alphabeticalChoice("up"), a: "a", b: "b", wantErr: policy.ErrInvalidPolicy},
		{name: "numerical asc", choice: numericalChoice("asc"), a: "10", b: "9", want: 1},
		{name: "numerical desc", choice: numericalChoice("desc"), a: "10", b: "9", want: -1},
		{name: "numerical equal values", choice: numericalChoice("asc"), a: "1.0", b: "1", want: 0},
		{name: "numerical not a number", choice: numericalChoice("asc"), a: "10", b: "ten", wantErr: policy.ErrInvalidTag},
		{
			name:   "filter extract applied first",
			choice: numericalChoice("asc"),
			filter: &imagev1.TagFilter{Pattern: `^main-[a-f0-9]+-(?P<ts>\d+)$`, Extract: "$ts"},
			a:      "main-fff-20",
			b:      "main-aaa-100",
			want:   -1,
		},
		{
			name:   "filter extract with semver",
			choice: semverChoice("*"),
			filter: &imagev1.TagFilter{Pattern: `^app-(.+)$`, Extract: "$1"},
			a:      "app-1.4.2",
			b:      "app-1.4.1",
			want:   1,
		},
		{
			name:    "tag outside the filter",
			choice:  semverChoice("*"),
			filter:  &imagev1.TagFilter{Pattern: `^app-(.+)$`, Extract: "$1"},
			a:       "app-1.4.2",
			b:       "1.4.1",
			wantErr: policy.ErrInvalidTag,
		},
		{
			name:    "bad regex",
			choice:  semverChoice("*"),
			filter:  &imagev1.TagFilter{Pattern: `(`},
			a:       "1.0.0",
			b:       "1.0.0",
			wantErr: policy.ErrInvalidPolicy,
		},
		{name: "no policy", choice: imagev1.ImagePolicyChoice{}, a: "1", b: "2", wantErr: policy.ErrInvalidPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := policy.Compare(tt.choice, tt.filter, tt.a, tt.b)
			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// TestCompareAgreesWithSelectLatest checks that the tag SelectLatest picks
// ranks at least as high as every other candidate under Compare, which is
// what the downgrade check relies on.
func TestCompareAgreesWithSelectLatest(t *testing.T) {
	filter := &imagev1.TagFilter{Pattern: `^(?:v)?(?P<v>.*)$`, Extract: "$v"}
	tags := []string{"1.0.0", "v2.1.0", "2.0.9", "2.1.0-rc.1", "0.0.1"}
	for _, choice := range []imagev1.ImagePolicyChoice{semverChoice("*"), semverChoice(">=1.0.0-0")} {
		g := NewWithT(t)
		latest, err := policy.SelectLatest(choice, filter, tags)
		g.Expect(err).NotTo(HaveOccurred())
		for _, tag := range tags {
			c, err := policy.Compare(choice, filter, latest, tag)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).To(BeNumerically(">=", 0), "%s vs %s", latest, tag)
		}
	}
}
