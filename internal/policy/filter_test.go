package policy_test

import (
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/policy"
)

func TestSelectLatestWithFilter(t *testing.T) {
	tests := []struct {
		name    string
		choice  imagev1.ImagePolicyChoice
		filter  *imagev1.TagFilter
		tags    []string
		want    string
		wantErr error
	}{
		{
			name:   "named group timestamp, numerical, original tag returned",
			choice: numericalChoice("asc"),
			filter: &imagev1.TagFilter{Pattern: `^main-[a-f0-9]+-(?P<ts>[0-9]+)$`, Extract: "$ts"},
			tags:   []string{"main-abc123-1700000000", "main-def456-1800000000", "main-0a1b2c-1750000000", "latest", "pr-12-1900000000"},
			want:   "main-def456-1800000000",
		},
		{
			name:   "braced named group",
			choice: numericalChoice("desc"),
			filter: &imagev1.TagFilter{Pattern: `^build-(?P<n>[0-9]+)$`, Extract: "${n}"},
			tags:   []string{"build-7", "build-3", "build-12"},
			want:   "build-3",
		},
		{
			name:   "numbered group, semver on the extracted version",
			choice: semverChoice(">=1.0.0 <2.0.0"),
			filter: &imagev1.TagFilter{Pattern: `^app-(\d+\.\d+\.\d+)-alpine$`, Extract: "$1"},
			tags:   []string{"app-1.2.0-alpine", "app-1.10.0-alpine", "app-2.0.0-alpine", "app-1.11.0", "1.12.0"},
			want:   "app-1.10.0-alpine",
		},
		{
			name:   "extract template combining groups",
			choice: semverChoice("*"),
			filter: &imagev1.TagFilter{Pattern: `^r(\d+)_(\d+)_(\d+)$`, Extract: "$1.$2.$3"},
			tags:   []string{"r1_2_3", "r1_10_0", "r0_99_0"},
			want:   "r1_10_0",
		},
		{
			name:   "pattern without extract orders the whole tag",
			choice: alphabeticalChoice("asc"),
			filter: &imagev1.TagFilter{Pattern: `^stable-`},
			tags:   []string{"stable-a", "stable-c", "zzz", "stable-b"},
			want:   "stable-c",
		},
		{
			name:   "pattern without extract, semver ignores non-versions",
			choice: semverChoice(">=1.0.0"),
			filter: &imagev1.TagFilter{Pattern: `^v`},
			tags:   []string{"v1.0.0", "v1.4.0", "2.0.0", "vnext"},
			want:   "v1.4.0",
		},
		{
			name:   "empty pattern keeps every tag",
			choice: semverChoice("*"),
			filter: &imagev1.TagFilter{},
			tags:   []string{"1.0.0", "2.0.0"},
			want:   "2.0.0",
		},
		{
			name:   "filter leaves only numbers for a numerical policy",
			choice: numericalChoice(""),
			filter: &imagev1.TagFilter{Pattern: `^[0-9]+$`},
			tags:   []string{"latest", "41", "42", "main"},
			want:   "42",
		},
		{
			name:   "equal extracted values map back to the last tag listed like Flux",
			choice: numericalChoice("asc"),
			filter: &imagev1.TagFilter{Pattern: `^[a-z]+-(?P<ts>[0-9]+)$`, Extract: "$ts"},
			tags:   []string{"dev-5", "main-5", "main-4"},
			want:   "main-5",
		},
		{
			name:   "unknown group expands to empty",
			choice: alphabeticalChoice("asc"),
			filter: &imagev1.TagFilter{Pattern: `^(a|b)$`, Extract: "$missing"},
			tags:   []string{"a", "b"},
			want:   "b",
		},
		{
			name:    "nothing matches the pattern",
			choice:  semverChoice("*"),
			filter:  &imagev1.TagFilter{Pattern: `^release-`},
			tags:    []string{"1.0.0", "main"},
			wantErr: policy.ErrNoMatch,
		},
		{
			name:    "extracted values out of range",
			choice:  semverChoice(">=2.0.0"),
			filter:  &imagev1.TagFilter{Pattern: `^app-(.*)$`, Extract: "$1"},
			tags:    []string{"app-1.0.0"},
			wantErr: policy.ErrNoMatch,
		},
		{
			name:    "extracted value not a number",
			choice:  numericalChoice("asc"),
			filter:  &imagev1.TagFilter{Pattern: `^b-(.*)$`, Extract: "$1"},
			tags:    []string{"b-1", "b-x"},
			wantErr: policy.ErrInvalidTag,
		},
		{
			name:    "bad regex",
			choice:  semverChoice("*"),
			filter:  &imagev1.TagFilter{Pattern: `^(unclosed`},
			tags:    []string{"1.0.0"},
			wantErr: policy.ErrInvalidPolicy,
		},
		{
			name:    "perl lookahead is not Go regexp",
			choice:  semverChoice("*"),
			filter:  &imagev1.TagFilter{Pattern: `^(?!dev).*`},
			tags:    []string{"1.0.0"},
			wantErr: policy.ErrInvalidPolicy,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := policy.SelectLatest(tt.choice, tt.filter, tt.tags)
			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestFilterApply(t *testing.T) {
	g := NewWithT(t)
	f, err := policy.NewFilter(&imagev1.TagFilter{Pattern: `^(?P<env>dev|prod)-(?P<n>\d+)$`, Extract: "$n"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Pattern()).To(Equal(`^(?P<env>dev|prod)-(?P<n>\d+)$`))

	got := f.Apply([]string{"dev-1", "prod-2", "other-3", "prod-1"})
	g.Expect(got.Values).To(Equal([]string{"1", "2"}))
	g.Expect(got.Original("1")).To(Equal("prod-1"))
	g.Expect(got.Original("2")).To(Equal("prod-2"))
	g.Expect(got.Original("3")).To(BeEmpty())

	value, ok := f.Extract("dev-42")
	g.Expect(ok).To(BeTrue())
	g.Expect(value).To(Equal("42"))
	_, ok = f.Extract("qa-42")
	g.Expect(ok).To(BeFalse())
}

func TestFilterNilKeepsEverything(t *testing.T) {
	g := NewWithT(t)
	f, err := policy.NewFilter(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Pattern()).To(BeEmpty())

	tags := []string{"b", "a", "b"}
	got := f.Apply(tags)
	g.Expect(got.Values).To(Equal(tags))
	g.Expect(got.Original("a")).To(Equal("a"))

	value, ok := f.Extract("anything")
	g.Expect(ok).To(BeTrue())
	g.Expect(value).To(Equal("anything"))
}

func TestNewFilterInvalidPattern(t *testing.T) {
	g := NewWithT(t)
	_, err := policy.NewFilter(&imagev1.TagFilter{Pattern: `[z-a]`})
	g.Expect(err).To(MatchError(policy.ErrInvalidPolicy))
	g.Expect(err.Error()).To(ContainSubstring(`[z-a]`))
}
