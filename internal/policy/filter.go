package policy

import (
	"fmt"
	"regexp"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
)

// Filter keeps the tags that match a TagFilter's pattern and maps each to the
// value the policy orders by: the tag itself, or the expansion of the
// filter's extract template (such as `$ts` or `$1`) against the match. A
// Filter made from a nil TagFilter keeps every tag unchanged.
type Filter struct {
	re      *regexp.Regexp
	extract string
}

// NewFilter compiles f. A nil f gives a Filter that keeps every tag. A
// pattern that is not a valid Go regular expression gives an error wrapping
// ErrInvalidPolicy.
func NewFilter(f *imagev1.TagFilter) (*Filter, error) {
	if f == nil {
		return &Filter{}, nil
	}
	re, err := regexp.Compile(f.Pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: filterTags.pattern %q: %w", ErrInvalidPolicy, f.Pattern, err)
	}
	return &Filter{re: re, extract: f.Extract}, nil
}

// Pattern returns the filter's regular expression, or "" when it keeps every
// tag.
func (f *Filter) Pattern() string {
	if f.re == nil {
		return ""
	}
	return f.re.String()
}

// Extract returns the value of tag to order by, and false when tag does not
// match the pattern.
func (f *Filter) Extract(tag string) (string, bool) {
	var buf []byte
	return f.extractInto(&buf, tag)
}

// extractInto is Extract expanding the template into *buf, so that a caller
// extracting many tags reuses one buffer.
func (f *Filter) extractInto(buf *[]byte, tag string) (string, bool) {
	if f.re == nil {
		return tag, true
	}
	match := f.re.FindStringSubmatchIndex(tag)
	if match == nil {
		return "", false
	}
	if f.extract == "" {
		return tag, true
	}
	*buf = f.re.ExpandString((*buf)[:0], f.extract, tag, match)
	return string(*buf), true
}

// Filtered is the outcome of applying a Filter to a list of tags.
type Filtered struct {
	// Values holds one entry per distinct value extracted from the tags
	// that matched, in the order first seen. For a Filter that keeps every
	// tag it is the tags slice itself, duplicates included.
	Values []string

	// original maps each value back to its tag; nil when values are the
	// tags themselves.
	original map[string]string
}

// Original returns the tag that value was extracted from. When several tags
// yield the same value, the one listed last wins, as in Flux.
func (r Filtered) Original(value string) string {
	if r.original == nil {
		return value
	}
	return r.original[value]
}

// Apply keeps the tags that match the pattern and extracts their values.
func (f *Filter) Apply(tags []string) Filtered {
	if f.re == nil {
		return Filtered{Values: tags}
	}
	out := Filtered{original: make(map[string]string)}
	var buf []byte
	for _, tag := range tags {
		value, ok := f.extractInto(&buf, tag)
		if !ok {
			continue
		}
		if _, seen := out.original[value]; !seen {
			out.Values = append(out.Values, value)
		}
		out.original[value] = tag
	}
	return out
}
