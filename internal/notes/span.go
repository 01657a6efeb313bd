package notes

import (
	"strings"

	"github.com/Masterminds/semver/v3"
)

// span is the versions after old up to new.
type span struct {
	old, new       string
	oldSem, newSem *semver.Version
	// seenNew says the newest-first walk of tags has met new (for tags
	// that are not semantic versions).
	seenNew bool
}

func newSpan(old, new string) *span {
	s := &span{old: old, new: new}
	o, err1 := semver.NewVersion(old)
	n, err2 := semver.NewVersion(new)
	if err1 == nil && err2 == nil {
		s.oldSem, s.newSem = o, n
	}
	return s
}

// place tells, for the tags of releases walked newest first, whether tag
// is after old up to new, and whether it is old itself: the walk can stop
// (an older tag may be a backport published later, so it does not stop
// the walk). Semantic versions are compared as such (a `v` prefix allowed);
// other tags by their place in the list, from new down to old.
func (s *span) place(tag string) (in, past bool) {
	if s.oldSem != nil {
		v, err := semver.NewVersion(tag)
		if err != nil {
			return false, false
		}
		return v.GreaterThan(s.oldSem) && !v.GreaterThan(s.newSem), v.Equal(s.oldSem)
	}
	switch {
	case sameTag(tag, s.old):
		return false, true
	case sameTag(tag, s.new):
		s.seenNew = true
		return true, false
	}
	return s.seenNew, false
}

// sameTag says whether a release tag names version: the same, or with a
// `v` prefix.
func sameTag(tag, version string) bool {
	return tag == version || strings.TrimPrefix(tag, "v") == strings.TrimPrefix(version, "v")
}
