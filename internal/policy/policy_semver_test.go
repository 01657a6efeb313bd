package policy_test

import (
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/policy"
)

func TestSelectLatestSemVer(t *testing.T) {
	tests := []struct {
		name    string
		rng     string
		tags    []string
		want    string
		wantErr error
	}{
		{
			name: "highest in open range",
			rng:  ">=1.0.0",
			tags: []string{"1.0.0", "1.2.0", "1.10.0", "1.9.3", "0.9.0"},
			want: "1.10.0",
		},
		{
			name: "wildcard range",
			rng:  "*",
			tags: []string{"0.1.0", "2.0.0", "1.0.0"},
			want: "2.0.0",
		},
		{
			name: "x range",
			rng:  "5.1.x",
			tags: []string{"5.0.3", "5.1.2", "5.1.4", "5.2.0", "6.0.0"},
			want: "5.1.4",
		},
		{
			name: "bounded major",
			rng:  ">=1.0.0 <2.0.0",
			tags: []string{"0.9.9", "1.0.0", "1.9.9", "2.0.0", "2.1.0"},
			want: "1.9.9",
		},
		{
			name: "bounded minor for a chart train",
			rng:  ">=3.7.0 <3.8.0",
			tags: []string{"3.6.9", "3.7.0", "3.7.12", "3.7.2", "3.8.0", "4.0.0"},
			want: "3.7.12",
		},
		{
			name: "comma separated and",
			rng:  ">=1.0.0, <1.5.0",
			tags: []string{"1.4.9", "1.5.0"},
			want: "1.4.9",
		},
		{
			name: "or groups",
			rng:  "<1.0.0 || >=3.0.0 <3.1.0",
			tags: []string{"0.5.0", "2.0.0", "3.0.7", "3.1.0"},
			want: "3.0.7",
		},
		{
			name: "prereleases excluded when the range has none",
			rng:  ">=1.0.0",
			tags: []string{"1.0.0", "1.1.0-rc.1", "2.0.0-alpha.1"},
			want: "1.0.0",
		},
		{
			name: "prereleases included by a -0 range",
			rng:  ">=1.0.0-0",
			tags: []string{"1.0.0", "1.1.0-rc.1", "1.1.0-rc.2", "1.0.1"},
			want: "1.1.0-rc.2",
		},
		{
			name: "release beats its own prereleases",
			rng:  ">=1.0.0-0",
			tags: []string{"1.1.0-rc.1", "1.1.0", "1.1.0-rc.2"},
			want: "1.1.0",
		},
		{
			name: "prerelease identifiers compared numerically",
			rng:  ">=2.0.0-0",
			tags: []string{"2.0.0-rc.9", "2.0.0-rc.10", "2.0.0-beta.11"},
			want: "2.0.0-rc.10",
		},
		{
			name:    "only prereleases and a range without them",
			rng:     ">=1.0.0",
			tags:    []string{"1.1.0-rc.1", "2.0.0-alpha.1"},
			wantErr: policy.ErrNoMatch,
		},
		{
			name: "v prefix accepted and returned as is",
			rng:  ">=1.0.0",
			tags: []string{"v1.0.0", "v1.3.0", "1.2.0"},
			want: "v1.3.0",
		},
		{
			name: "v prefix with prerelease",
			rng:  ">=1.0.0-0",
			tags: []string{"v1.0.0", "v1.1.0-rc.1"},
			want: "v1.1.0-rc.1",
		},
		{
			name: "equal versions keep the first listed",
			rng:  "*",
			tags: []string{"v1.0.0", "1.0.0", "1.0.0+build.2"},
			want: "v1.0.0",
		},
		{
			name: "build metadata does not rank",
			rng:  "*",
			tags: []string{"1.0.0+b", "1.0.0+z", "0.9.0"},
			want: "1.0.0+b",
		},
		{
			name: "tags that are not strict semver are ignored",
			rng:  ">=0.0.0",
			tags: []string{"latest", "1.2", "3", "01.2.3", "vv2.0.0", "V2.0.0", "1.2.3.4", "sha-abc", "1.0.0"},
			want: "1.0.0",
		},
		{
			name:    "nothing in range",
			rng:     ">=5.0.0",
			tags:    []string{"1.0.0", "4.9.9"},
			wantErr: policy.ErrNoMatch,
		},
		{
			name:    "no semver tag at all",
			rng:     "*",
			tags:    []string{"latest", "main"},
			wantErr: policy.ErrNoMatch,
		},
		{
			name:    "empty tag list",
			rng:     "*",
			tags:    nil,
			wantErr: policy.ErrNoMatch,
		},
		{
			name:    "empty range",
			rng:     "",
			tags:    []string{"1.0.0"},
			wantErr: policy.ErrInvalidPolicy,
		},
		{
			name:    "garbage range",
			rng:     "latest please",
			tags:    []string{"1.0.0"},
			wantErr: policy.ErrInvalidPolicy,
		},
		{
			name:    "range with a bad operator",
			rng:     ">>1.0.0",
			tags:    []string{"1.0.0"},
			wantErr: policy.ErrInvalidPolicy,
		},
		{
			name:    "range with a dangling or",
			rng:     ">=1.0.0 || ",
			tags:    []string{"1.0.0"},
			wantErr: policy.ErrInvalidPolicy,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := policy.SelectLatest(semverChoice(tt.rng), nil, tt.tags)
			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestSelectLatestSemVerLeavesInputAlone(t *testing.T) {
	g := NewWithT(t)
	tags := []string{"1.0.0", "3.0.0", "2.0.0"}
	_, err := policy.SelectLatest(semverChoice("*"), nil, tags)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).To(Equal([]string{"1.0.0", "3.0.0", "2.0.0"}))
}

func TestNewSelectorChoice(t *testing.T) {
	tests := []struct {
		name    string
		choice  imagev1.ImagePolicyChoice
		wantErr bool
	}{
		{name: "semver", choice: semverChoice(">=1.0.0")},
		{name: "alphabetical", choice: alphabeticalChoice("")},
		{name: "numerical", choice: numericalChoice("desc")},
		{name: "none", choice: imagev1.ImagePolicyChoice{}, wantErr: true},
		{
			name: "semver and alphabetical",
			choice: imagev1.ImagePolicyChoice{
				SemVer:       &imagev1.SemVerPolicy{Range: "*"},
				Alphabetical: &imagev1.AlphabeticalPolicy{},
			},
			wantErr: true,
		},
		{
			name: "alphabetical and numerical",
			choice: imagev1.ImagePolicyChoice{
				Alphabetical: &imagev1.AlphabeticalPolicy{},
				Numerical:    &imagev1.NumericalPolicy{},
			},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			sel, err := policy.NewSelector(tt.choice)
			if tt.wantErr {
				g.Expect(err).To(MatchError(policy.ErrInvalidPolicy))
				g.Expect(sel).To(BeNil())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sel).NotTo(BeNil())
		})
	}
}
