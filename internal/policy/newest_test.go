package policy_test

import (
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/policy"
)

func TestNewest(t *testing.T) {
	tests := []struct {
		name     string
		choice   imagev1.ImagePolicyChoice
		versions []string
		n        int
		want     []string
		wantErr  error
	}{
		{"semver in range, highest first", semverChoice(">=1.0.0 <2.0.0"),
			[]string{"1.0.0", "2.0.0", "1.2.0", "latest", "v1.1.0", "1.3.0-rc.1"}, 10, []string{"1.2.0", "v1.1.0", "1.0.0"}, nil},
		{"semver bounded by n", semverChoice(">=1.0.0"), []string{"1.0.0", "1.2.0", "1.1.0"}, 2, []string{"1.2.0", "1.1.0"}, nil},
		{"semver none", semverChoice(">=3.0.0"), []string{"1.0.0"}, 5, []string{}, nil},
		{"numerical asc", numericalChoice("asc"), []string{"3", "10", "1.5"}, 10, []string{"10", "3", "1.5"}, nil},
		{"numerical desc", numericalChoice("desc"), []string{"3", "10", "1.5"}, 2, []string{"1.5", "3"}, nil},
		{"numerical not a number", numericalChoice("asc"), []string{"3", "x"}, 2, nil, policy.ErrInvalidTag},
		{"alphabetical asc", alphabeticalChoice(""), []string{"b", "c", "a"}, 10, []string{"c", "b", "a"}, nil},
		{"alphabetical desc", alphabeticalChoice("DESC"), []string{"b", "c", "a"}, 1, []string{"a"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			sel, err := policy.NewSelector(tt.choice)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := sel.Newest(tt.versions, tt.n)
			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
			if len(got) > 0 {
				g.Expect(sel.Latest(tt.versions)).To(Equal(got[0]), "the first is what Latest selects")
			}
		})
	}
}
