package policy

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// semVer selects the highest semantic version inside a range.
type semVer struct {
	rng        string
	constraint *semver.Constraints
}

// newSemVer parses rng with Masterminds semver, whose rules decide which
// prereleases a range admits (`>=1.0.0` none, `>=1.0.0-0` all).
func newSemVer(rng string) (*semVer, error) {
	c, err := semver.NewConstraint(rng)
	if err != nil {
		return nil, fmt.Errorf("%w: semver range %q: %w", ErrInvalidPolicy, rng, err)
	}
	return &semVer{rng: rng, constraint: c}, nil
}

// parseVersion accepts a strict semantic version with an optional leading
// "v", like Flux's version.ParseVersion; "1.2" or "01.2.3" are not versions.
func parseVersion(tag string) (*semver.Version, error) {
	return semver.StrictNewVersion(strings.TrimPrefix(tag, "v"))
}

// Latest returns the highest version in range; tags that are not semantic
// versions are ignored. Of versions that compare equal (such as "1.0.0" and
// "v1.0.0"), the first listed wins.
func (s *semVer) Latest(versions []string) (string, error) {
	var latest *semver.Version
	latestTag := ""
	for _, tag := range versions {
		v, err := parseVersion(tag)
		if err != nil {
			continue
		}
		// Checking the range costs more than comparing (a failed check
		// allocates its reasons), so only a version that would win is
		// checked.
		if latest != nil && !v.GreaterThan(latest) {
			continue
		}
		if s.constraint.Check(v) {
			latest, latestTag = v, tag
		}
	}
	if latest == nil {
		return "", fmt.Errorf("%w: none of %d tags is a semantic version in range %q", ErrNoMatch, len(versions), s.rng)
	}
	return latestTag, nil
}

// Compare orders a and b by semantic version precedence, outside any range.
func (s *semVer) Compare(a, b string) (int, error) {
	va, err := parseVersion(a)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a semantic version: %w", ErrInvalidTag, a, err)
	}
	vb, err := parseVersion(b)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a semantic version: %w", ErrInvalidTag, b, err)
	}
	return va.Compare(vb), nil
}
