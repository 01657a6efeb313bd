package policy

import (
	"cmp"
	"slices"

	"github.com/Masterminds/semver/v3"
)

// ranked is a version with the key its policy orders by.
type ranked[K any] struct {
	version string
	key     K
}

// newest returns up to n of versions, highest ranked first: key parses a
// version and reports whether it is a candidate at all, rank orders two
// keys. A key error fails the whole call, as it fails Latest.
func newest[K any](versions []string, n int, key func(string) (K, bool, error), rank func(a, b K) int) ([]string, error) {
	candidates := make([]ranked[K], 0, len(versions))
	for _, v := range versions {
		k, ok, err := key(v)
		if err != nil {
			return nil, err
		}
		if ok {
			candidates = append(candidates, ranked[K]{version: v, key: k})
		}
	}
	slices.SortStableFunc(candidates, func(a, b ranked[K]) int { return rank(b.key, a.key) })
	out := make([]string, 0, min(n, len(candidates)))
	for _, c := range candidates[:min(n, len(candidates))] {
		out = append(out, c.version)
	}
	return out, nil
}

// Newest returns up to n semantic versions in range, highest first.
func (s *semVer) Newest(versions []string, n int) ([]string, error) {
	return newest(versions, n, func(tag string) (*semver.Version, bool, error) {
		v, err := parseVersion(tag)
		return v, err == nil && s.constraint.Check(v), nil
	}, func(a, b *semver.Version) int { return a.Compare(b) })
}

// Newest returns up to n versions in numerical order, highest ranked
// first; a version that is not a number fails the call, as in Latest.
func (p *numerical) Newest(versions []string, n int) ([]string, error) {
	return newest(versions, n, func(tag string) (float64, bool, error) {
		v, err := parseNumber(tag)
		return v, err == nil, err
	}, func(a, b float64) int { return p.sign * cmp.Compare(a, b) })
}

// Newest returns up to n versions in alphabetical order, highest ranked
// first.
func (p *alphabetical) Newest(versions []string, n int) ([]string, error) {
	return newest(versions, n, func(tag string) (string, bool, error) { return tag, true, nil }, p.rank)
}
