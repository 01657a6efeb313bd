package source

import (
	"errors"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/policy"
)

func TestPrereleasesAllowed(t *testing.T) {
	for rng, want := range map[string]bool{
		">=1.0.0":          false,
		"1.0.0 - 2.0.0":    false,
		">=1.0.0-0":        true,
		"~2.1.0-rc.1":      true,
		">=1.0.0 <2.0.0":   false,
		"1.x || >=3.0.0-0": true,
	} {
		if got := PrereleasesAllowed(imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: rng}}); got != want {
			t.Errorf("PrereleasesAllowed(%q) = %v, want %v", rng, got, want)
		}
	}
	if PrereleasesAllowed(imagev1.ImagePolicyChoice{Alphabetical: &imagev1.AlphabeticalPolicy{}}) {
		t.Error("an alphabetical policy allows prereleases")
	}
}

// Only prereleases left: the error says they were left out, and why.
func TestSelectOnlyPrereleases(t *testing.T) {
	g := NewWithT(t)
	_, err := Select(imagev1.ImagePolicyChoice{Alphabetical: &imagev1.AlphabeticalPolicy{}}, nil,
		[]Version{{Version: "b", Prerelease: true}})
	g.Expect(errors.Is(err, policy.ErrNoMatch)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("1 prereleases left out"))
}
