package policy_test

import (
	"fmt"
	"slices"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"

	"github.com/uprev-dev/uprev/internal/policy"
)

// semverTags returns n distinct tags shaped by format around a semantic
// version, with a prerelease every tenth tag, in lexical order as registries
// list them.
func semverTags(n int, format string) []string {
	tags := make([]string, 0, n)
	for i := range n {
		v := fmt.Sprintf("%d.%d.%d", i/1000, (i/10)%100, i%10)
		if i%10 == 9 {
			v += "-rc.1"
		}
		tags = append(tags, fmt.Sprintf(format, v))
	}
	slices.Sort(tags)
	return tags
}

func BenchmarkSelectLatest10000(b *testing.B) {
	b.Run("semver", func(b *testing.B) {
		tags := semverTags(10000, "v%s")
		choice := semverChoice(">=3.0.0 <8.0.0")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := policy.SelectLatest(choice, nil, tags); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("semver-filter", func(b *testing.B) {
		tags := semverTags(10000, "app-%s-alpine")
		choice := semverChoice(">=3.0.0 <8.0.0")
		filter := &imagev1.TagFilter{Pattern: `^app-(?P<version>.+)-alpine$`, Extract: "$version"}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := policy.SelectLatest(choice, filter, tags); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("numerical", func(b *testing.B) {
		// Build numbers and timestamps, as CI pipelines tag images.
		tags := make([]string, 0, 10000)
		for i := range 10000 {
			if i%2 == 0 {
				tags = append(tags, fmt.Sprintf("%d", 100000+i*7))
			} else {
				tags = append(tags, fmt.Sprintf("2026%02d%02d%06d", 1+i%12, 1+i%28, i))
			}
		}
		slices.Sort(tags)
		choice := imagev1.ImagePolicyChoice{Numerical: &imagev1.NumericalPolicy{Order: "asc"}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := policy.SelectLatest(choice, nil, tags); err != nil {
				b.Fatal(err)
			}
		}
	})
}
