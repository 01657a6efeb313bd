package policy_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/policy"
)

func TestSelectLatestAlphabetical(t *testing.T) {
	tests := []struct {
		name    string
		order   string
		tags    []string
		want    string
		wantErr error
	}{
		{
			name:  "default order is asc and selects the greatest",
			order: "",
			tags:  []string{"a", "z", "m"},
			want:  "z",
		},
		{
			name:  "asc",
			order: "asc",
			tags:  []string{"RELEASE.2023-01-31T08-42-01Z", "RELEASE.2024-05-01T00-00-00Z", "RELEASE.2023-12-24T10-10-10Z"},
			want:  "RELEASE.2024-05-01T00-00-00Z",
		},
		{
			name:  "desc selects the least",
			order: "desc",
			tags:  []string{"b", "a", "c"},
			want:  "a",
		},
		{
			name:  "order is case-insensitive like Flux",
			order: "DESC",
			tags:  []string{"b", "a", "c"},
			want:  "a",
		},
		{
			name:  "byte order, not numeric",
			order: "asc",
			tags:  []string{"9", "10", "100"},
			want:  "9",
		},
		{
			name:  "upper case sorts before lower case",
			order: "asc",
			tags:  []string{"Zeta", "alpha"},
			want:  "alpha",
		},
		{
			name:  "single tag",
			order: "desc",
			tags:  []string{"only"},
			want:  "only",
		},
		{
			name:    "empty list",
			order:   "asc",
			tags:    []string{},
			wantErr: policy.ErrNoMatch,
		},
		{
			name:    "unknown order",
			order:   "ascending",
			tags:    []string{"a"},
			wantErr: policy.ErrInvalidPolicy,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := policy.SelectLatest(alphabeticalChoice(tt.order), nil, tt.tags)
			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestSelectLatestAlphabeticalLeavesInputAlone(t *testing.T) {
	g := NewWithT(t)
	tags := []string{"b", "c", "a"}
	_, err := policy.SelectLatest(alphabeticalChoice("desc"), nil, tags)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).To(Equal([]string{"b", "c", "a"}))
}
