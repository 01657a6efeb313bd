// Package policy selects the latest tag of an image from a list of tags, the
// way Flux's image-reflector-controller does for an ImagePolicy
// (image.toolkit.fluxcd.io/v1): by semantic version range, alphabetically or
// numerically, after an optional tag filter that may extract the part of each
// tag to order by.
//
// The package is pure: it takes the policy's spec and a list of tags and
// returns a tag or a typed error. Callers tell the errors apart with
// errors.Is against ErrInvalidPolicy, ErrNoMatch and ErrInvalidTag.
package policy

import (
	"errors"
	"fmt"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
)

var (
	// ErrInvalidPolicy is wrapped by every error caused by the policy's own
	// configuration: no or several policies set, a range that does not
	// parse, an unknown order, a filter pattern that does not compile.
	// Retrying does not help; the object needs a new spec.
	ErrInvalidPolicy = errors.New("invalid policy")

	// ErrNoMatch is wrapped when no tag is left to select from: the list is
	// empty, no tag matches the filter pattern, or no tag is a semantic
	// version inside the range. The last selected tag stays valid.
	ErrNoMatch = errors.New("no tag matches the policy")

	// ErrInvalidTag is wrapped when a tag (after extraction) cannot be
	// ordered by the policy: a value that is not a number for a numerical
	// policy (Flux fails the whole selection in that case rather than
	// skipping the tag), or, in Compare, a tag that is not a semantic
	// version or does not match the filter pattern.
	ErrInvalidTag = errors.New("tag cannot be ordered by the policy")
)

// Selector orders tags by one policy kind.
type Selector interface {
	// Latest returns the version the policy selects from versions: the
	// highest semantic version in range, or the last value in the
	// alphabetical or numerical order. It does not modify versions.
	Latest(versions []string) (string, error)

	// Newest returns up to n of versions in the policy's ranking, highest
	// first, leaving out those Latest would never select (outside the
	// semver range, not a semantic version). Its first element is what
	// Latest returns, up to the order of versions ranked the same.
	Newest(versions []string, n int) ([]string, error)

	// Compare orders a against b by the policy's ordering, ignoring any
	// semver range: it returns a positive number when the policy ranks a
	// above b (would select a over b), a negative number when it ranks a
	// below b, and zero when it ranks them the same.
	Compare(a, b string) (int, error)
}

// NewSelector returns the Selector for choice. Exactly one of SemVer,
// Alphabetical and Numerical must be set; otherwise, and when the range or
// order is invalid, the error wraps ErrInvalidPolicy.
func NewSelector(choice imagev1.ImagePolicyChoice) (Selector, error) {
	set := 0
	for _, isSet := range []bool{choice.SemVer != nil, choice.Alphabetical != nil, choice.Numerical != nil} {
		if isSet {
			set++
		}
	}
	switch {
	case set == 0:
		return nil, fmt.Errorf("%w: no policy set, one of semver, alphabetical or numerical is required", ErrInvalidPolicy)
	case set > 1:
		return nil, fmt.Errorf("%w: more than one policy set, only one of semver, alphabetical or numerical is allowed", ErrInvalidPolicy)
	case choice.SemVer != nil:
		return newSemVer(choice.SemVer.Range)
	case choice.Alphabetical != nil:
		return newAlphabetical(choice.Alphabetical.Order)
	default:
		return newNumerical(choice.Numerical.Order)
	}
}

// SelectLatest applies filter (nil keeps every tag) and then choice to tags,
// and returns the original tag of the selected value. It is the whole of an
// ImagePolicy's selection.
func SelectLatest(choice imagev1.ImagePolicyChoice, filter *imagev1.TagFilter, tags []string) (string, error) {
	sel, err := NewSelector(choice)
	if err != nil {
		return "", err
	}
	f, err := NewFilter(filter)
	if err != nil {
		return "", err
	}
	if len(tags) == 0 {
		return "", fmt.Errorf("%w: the tag list is empty", ErrNoMatch)
	}
	filtered := f.Apply(tags)
	if len(filtered.Values) == 0 {
		return "", fmt.Errorf("%w: none of %d tags matches pattern %q", ErrNoMatch, len(tags), f.Pattern())
	}
	latest, err := sel.Latest(filtered.Values)
	if err != nil {
		return "", err
	}
	return filtered.Original(latest), nil
}

// Compare orders tag a against tag b by the ordering of choice, after
// extracting each tag's value with filter (nil uses the tags as they are).
// The result is positive when the policy ranks a above b, negative when it
// ranks a below b and zero when it ranks them the same; a semver range is not
// applied. The error wraps ErrInvalidPolicy for a bad spec and ErrInvalidTag
// when a tag does not match the filter or cannot be ordered.
func Compare(choice imagev1.ImagePolicyChoice, filter *imagev1.TagFilter, a, b string) (int, error) {
	sel, err := NewSelector(choice)
	if err != nil {
		return 0, err
	}
	f, err := NewFilter(filter)
	if err != nil {
		return 0, err
	}
	va, ok := f.Extract(a)
	if !ok {
		return 0, fmt.Errorf("%w: tag %q does not match pattern %q", ErrInvalidTag, a, f.Pattern())
	}
	vb, ok := f.Extract(b)
	if !ok {
		return 0, fmt.Errorf("%w: tag %q does not match pattern %q", ErrInvalidTag, b, f.Pattern())
	}
	return sel.Compare(va, vb)
}
