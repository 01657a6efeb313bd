package policy_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/policy"
)

func TestSelectLatestNumerical(t *testing.T) {
	tests := []struct {
		name    string
		order   string
		tags    []string
		want    string
		wantErr error
	}{
		{
			name:  "default order is asc and selects the highest",
			order: "",
			tags:  []string{"1", "10", "9", "2"},
			want:  "10",
		},
		{
			name:  "asc with timestamps",
			order: "asc",
			tags:  []string{"1612345678", "1712345678", "1699999999"},
			want:  "1712345678",
		},
		{
			name:  "desc selects the lowest",
			order: "desc",
			tags:  []string{"5", "3", "8"},
			want:  "3",
		},
		{
			name:  "order is case-insensitive like Flux",
			order: "Desc",
			tags:  []string{"5", "3", "8"},
			want:  "3",
		},
		{
			name:  "floats",
			order: "asc",
			tags:  []string{"1.5", "1.25", "1.49", "-3"},
			want:  "1.5",
		},
		{
			name:  "negative numbers with desc",
			order: "desc",
			tags:  []string{"0", "-1.5", "-1"},
			want:  "-1.5",
		},
		{
			name:  "exponent notation",
			order: "asc",
			tags:  []string{"1e3", "999"},
			want:  "1e3",
		},
		{
			name:  "equal values keep the last listed like Flux",
			order: "asc",
			tags:  []string{"1", "1.0", "01"},
			want:  "01",
		},
		{
			name:  "equal values keep the last listed in desc too",
			order: "desc",
			tags:  []string{"2", "1", "1.0"},
			want:  "1.0",
		},
		{
			name:    "a tag that is not a number fails the selection like Flux",
			order:   "asc",
			tags:    []string{"1", "latest", "2"},
			wantErr: policy.ErrInvalidTag,
		},
		{
			name:    "NaN is not orderable",
			order:   "asc",
			tags:    []string{"1", "NaN"},
			wantErr: policy.ErrInvalidTag,
		},
		{
			name:    "empty list",
			order:   "asc",
			tags:    nil,
			wantErr: policy.ErrNoMatch,
		},
		{
			name:    "unknown order",
			order:   "newest",
			tags:    []string{"1"},
			wantErr: policy.ErrInvalidPolicy,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := policy.SelectLatest(numericalChoice(tt.order), nil, tt.tags)
			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
