package guard

import (
	"fmt"
	"regexp"
	"strings"
)

// UpdateTrailerKey is the key of the trailer an automation commit carries
// for each change it makes.
const UpdateTrailerKey = "Uprev-Update"

// Update is one change of an automation commit: the version of Policy went
// from Old to New.
type Update struct {
	// Policy is the ImagePolicy as namespace/name.
	Policy string
	// Old is the version before the change; empty when there was none.
	Old string
	// New is the version written.
	New string
}

var updateTrailerRE = regexp.MustCompile(`(?m)^` + UpdateTrailerKey + `:[ \t]+(\S+)[ \t]+(?:(\S+)[ \t]+)?-->[ \t]+(\S+)[ \t]*$`)

// FormatUpdateTrailer returns the trailer line for u, without a newline:
// `Uprev-Update: <namespace>/<policy> <old> --> <new>`. Fields must not
// contain white space; an empty Old is left out.
func FormatUpdateTrailer(u Update) string {
	if u.Old == "" {
		return fmt.Sprintf("%s: %s --> %s", UpdateTrailerKey, u.Policy, u.New)
	}
	return fmt.Sprintf("%s: %s %s --> %s", UpdateTrailerKey, u.Policy, u.Old, u.New)
}

// AppendUpdateTrailers returns message followed by the trailer block that
// ParseUpdateTrailers reads back: a blank line, then one trailer line per
// update, in order. A message with no updates gets the blank line only, as
// git's own trailers would leave it.
func AppendUpdateTrailers(message string, updates []Update) string {
	var b strings.Builder
	b.WriteString(message)
	if !strings.HasSuffix(message, "\n") {
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, u := range updates {
		b.WriteString(FormatUpdateTrailer(u))
		b.WriteString("\n")
	}
	return b.String()
}

// ParseUpdateTrailers returns the updates of every Uprev-Update line of a
// commit message, in order.
func ParseUpdateTrailers(message string) []Update {
	var updates []Update
	for _, m := range updateTrailerRE.FindAllStringSubmatch(message, -1) {
		updates = append(updates, Update{Policy: m[1], Old: m[2], New: m[3]})
	}
	return updates
}
