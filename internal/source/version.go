package source

import (
	"fmt"
	"regexp"
	"slices"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"

	"github.com/uprev-dev/uprev/internal/policy"
)

// Version is one version a source lists.
type Version struct {
	// Version is the version string as the source names it.
	Version string
	// URL is where the version's artifact is, when the source says.
	URL string
	// Digest is the artifact's digest as sha256:<hex>, when the source
	// publishes one.
	Digest string
	// Prerelease says the source marks the version as a prerelease
	// (GitHub's prerelease flag).
	Prerelease bool
}

// Listing is what one scan of a source found.
type Listing struct {
	// Versions are the versions listed, in the source's order.
	Versions []Version
	// NotModified says every request of the scan was answered 304 Not
	// Modified: the source is unchanged since the last scan.
	NotModified bool
}

// Names returns the version strings of l.
func (l Listing) Names() []string {
	names := make([]string, len(l.Versions))
	for i, v := range l.Versions {
		names[i] = v.Version
	}
	return names
}

// Select picks the version choice and filter select from versions, the
// way an ImagePolicy picks a tag (policy.SelectLatest). Versions the source
// marks as prereleases take part only when PrereleasesAllowed(choice). The
// error wraps policy.ErrInvalidPolicy or policy.ErrNoMatch.
func Select(choice imagev1.ImagePolicyChoice, filter *imagev1.TagFilter, versions []Version) (Version, error) {
	candidates := versions
	if !PrereleasesAllowed(choice) {
		candidates = slices.DeleteFunc(slices.Clone(versions), func(v Version) bool { return v.Prerelease })
	}
	names := make([]string, len(candidates))
	for i, v := range candidates {
		names[i] = v.Version
	}
	name, err := policy.SelectLatest(choice, filter, names)
	if err != nil {
		if len(candidates) < len(versions) {
			return Version{}, fmt.Errorf("%w (%d prereleases left out: the policy is not a semver range with a prerelease, such as >=1.0.0-0)", err, len(versions)-len(candidates))
		}
		return Version{}, err
	}
	i := slices.IndexFunc(candidates, func(v Version) bool { return v.Version == name })
	return candidates[i], nil
}

// PrereleasesAllowed tells whether versions marked as prereleases may be
// selected: only by a semver policy whose range names a prerelease (such
// as >=1.0.0-0), the rule semantic versioning applies to prerelease
// version strings.
func PrereleasesAllowed(choice imagev1.ImagePolicyChoice) bool {
	return choice.SemVer != nil && prereleaseInRange.MatchString(choice.SemVer.Range)
}

// prereleaseInRange matches a version with a prerelease in a range (1.0.0-0),
// not a hyphen range (1.0.0 - 2.0.0).
var prereleaseInRange = regexp.MustCompile(`[0-9A-Za-z]-[0-9A-Za-z]`)
