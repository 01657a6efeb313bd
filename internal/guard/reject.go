package guard

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// RejectTrailerKey is the key of the trailer of a rejection commit, one per
// rejected version: `Uprev-Reject: <namespace>/<policy> <version>`.
const RejectTrailerKey = "Uprev-Reject"

// RejectReasonTrailerKey is the key of the trailer that says why the
// versions of a rejection commit were rejected.
const RejectReasonTrailerKey = "Uprev-Reject-Reason"

// MaxRejectReason bounds a rejection's reason, in bytes, as it is read
// from Git: a longer one is cut (at a character) and ends with "…".
const MaxRejectReason = 512

var (
	rejectTrailerRE = regexp.MustCompile(`(?m)^` + RejectTrailerKey + `:[ \t]+(\S+)[ \t]+(\S+)[ \t]*$`)
	rejectReasonRE  = regexp.MustCompile(`(?m)^` + RejectReasonTrailerKey + `:[ \t]*(.*)$`)
)

// Rejection is a version a person rejected without a revert (`uprev
// reject`): a commit records it, and it holds that version as a revert
// would, with Reason.
type Rejection struct {
	// Policy is the policy as namespace/name (ReleaseSource/namespace/name
	// for a ReleaseSource).
	Policy string
	// Version is the rejected version.
	Version string
	// Reason says why.
	Reason string
}

// RejectionMessage returns the message of a commit that records
// rejection: a subject naming it, a line on how the hold is lifted, and
// the trailers ParseRejections reads back. The reason is one line: its
// white space (newlines included) is folded into single spaces.
func RejectionMessage(r Rejection) (string, error) {
	reason := foldReason(r.Reason)
	switch {
	case strings.ContainsAny(r.Policy, " \t\r\n") || r.Policy == "":
		return "", fmt.Errorf("policy %q: a name without white space is required", r.Policy)
	case strings.ContainsAny(r.Version, " \t\r\n") || r.Version == "":
		return "", fmt.Errorf("version %q: a version without white space is required", r.Version)
	case reason == "":
		return "", fmt.Errorf("a reason is required")
	case len(reason) > MaxRejectReason:
		return "", fmt.Errorf("the reason is %d bytes long; at most %d are kept", len(reason), MaxRejectReason)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Reject %s %s\n\n", r.Policy, r.Version)
	b.WriteString("uprev does not propose this version again until `uprev release-hold` lifts the hold.\n\n")
	fmt.Fprintf(&b, "%s: %s %s\n", RejectTrailerKey, r.Policy, r.Version)
	fmt.Fprintf(&b, "%s: %s\n", RejectReasonTrailerKey, reason)
	return b.String(), nil
}

// ParseRejections returns the rejections a commit message records: one
// per Uprev-Reject trailer, each with the message's Uprev-Reject-Reason
// (the first one), its white space folded and cut at MaxRejectReason.
// The reason is read as written by whoever wrote the commit: it is
// untrusted text for whatever shows it.
func ParseRejections(message string) []Rejection {
	matches := rejectTrailerRE.FindAllStringSubmatch(message, -1)
	if len(matches) == 0 {
		return nil
	}
	var reason string
	if m := rejectReasonRE.FindStringSubmatch(message); m != nil {
		reason = cutReason(foldReason(m[1]))
	}
	out := make([]Rejection, 0, len(matches))
	for _, m := range matches {
		out = append(out, Rejection{Policy: m[1], Version: m[2], Reason: reason})
	}
	return out
}

// foldReason folds the white space of a reason into single spaces.
func foldReason(reason string) string {
	return strings.Join(strings.Fields(reason), " ")
}

// cutReason cuts reason to MaxRejectReason bytes, at a character.
func cutReason(reason string) string {
	if len(reason) <= MaxRejectReason {
		return reason
	}
	cut := MaxRejectReason - len("…")
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut] + "…"
}

// withoutRejectReasons returns message without its Uprev-Reject-Reason
// lines.
func withoutRejectReasons(message string) string {
	return rejectReasonRE.ReplaceAllString(message, "")
}
