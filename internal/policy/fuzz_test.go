package policy_test

import (
	"errors"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"

	"github.com/uprev-dev/uprev/internal/policy"
)

// FuzzSelectLatest feeds user-controlled ranges, filter patterns, extract
// templates and tag lists (comma separated) through every policy kind. It
// checks that nothing panics, that every error is one of the package's
// sentinels, that a selected tag is one of the input tags, and that Compare
// never ranks another candidate above it.
func FuzzSelectLatest(f *testing.F) {
	f.Add(">=1.0.0", "", "", "1.0.0,1.2.0,v1.3.0-rc.1,latest")
	f.Add(">=1.0.0-0", `^v?(?P<v>.*)$`, "$v", "v1.0.0,1.1.0-rc.1,1.0.1")
	f.Add(">=3.7.0 <3.8.0", `^app-(\d+\.\d+\.\d+)$`, "$1", "app-3.7.1,app-3.8.0,app-3.7.10")
	f.Add("*", `^main-[a-f0-9]+-(?P<ts>[0-9]+)`, "$ts", "main-abc-100,main-def-99,dev-1")
	f.Add("", `(`, "${", ",,")
	f.Add("1.x || >=2.0.0-beta <2.0.0", `(a)(b)?`, "$2$1${10}", "ab,a,b,1e3,NaN,-0")
	f.Fuzz(func(t *testing.T, rng, pattern, extract, joined string) {
		tags := strings.Split(joined, ",")
		filters := []*imagev1.TagFilter{nil, {Pattern: pattern, Extract: extract}}
		choices := []imagev1.ImagePolicyChoice{
			semverChoice(rng),
			alphabeticalChoice("asc"),
			alphabeticalChoice("desc"),
			numericalChoice("asc"),
			numericalChoice("desc"),
		}
		for _, filter := range filters {
			for _, choice := range choices {
				latest, err := policy.SelectLatest(choice, filter, tags)
				if err != nil {
					if !errors.Is(err, policy.ErrInvalidPolicy) && !errors.Is(err, policy.ErrNoMatch) && !errors.Is(err, policy.ErrInvalidTag) {
						t.Fatalf("untyped error: %v", err)
					}
					continue
				}
				checkLatest(t, choice, filter, tags, latest)
			}
		}
	})
}

// checkLatest fails t unless latest is one of tags and no candidate ranks
// above it.
func checkLatest(t *testing.T, choice imagev1.ImagePolicyChoice, filter *imagev1.TagFilter, tags []string, latest string) {
	t.Helper()
	found := false
	for _, tag := range tags {
		if tag == latest {
			found = true
		}
		// Only candidates the policy would itself select from count; for
		// semver that means tags in range, which a one-tag selection tells.
		if _, err := policy.SelectLatest(choice, filter, []string{tag}); err != nil {
			continue
		}
		c, err := policy.Compare(choice, filter, latest, tag)
		if err != nil {
			t.Fatalf("comparing selected %q with candidate %q: %v", latest, tag, err)
		}
		if c < 0 {
			t.Fatalf("selected %q ranks below candidate %q", latest, tag)
		}
	}
	if !found {
		t.Fatalf("selected %q is not one of the tags %q", latest, tags)
	}
}
