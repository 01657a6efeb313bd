package registry

import (
	"fmt"
	"regexp"
)

// Exclude returns the tags that match none of patterns (regular expressions,
// spec.exclusionList), in their original order. An invalid pattern is a
// configuration error wrapping ErrInvalidConfig.
func Exclude(tags []string, patterns []string) ([]string, error) {
	exclusions := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("%w: compiling exclusion pattern %q: %w", ErrInvalidConfig, p, err)
		}
		exclusions = append(exclusions, re)
	}
	kept := make([]string, 0, len(tags))
next:
	for _, tag := range tags {
		for _, re := range exclusions {
			if re.MatchString(tag) {
				continue next
			}
		}
		kept = append(kept, tag)
	}
	return kept, nil
}
