package guard

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/uprev-dev/uprev/internal/update"
)

// Hold is a version of a policy that a revert rolled back, or that a
// person rejected (`uprev reject`): the automation must not write it
// again.
type Hold struct {
	// Policy is the ImagePolicy as namespace/name.
	Policy string
	// Version is the reverted or rejected version.
	Version string
	// RevertedIn is the SHA of the commit that holds the version: the
	// revert, or the commit that records the rejection.
	RevertedIn string
	// Reason is why the version was rejected, as its rejection commit says
	// (untrusted text); empty for a revert.
	Reason string
}

// On reports whether h holds ref: its tag, or its tag@digest, the form of
// a digest-only update. The fleet view reads it too, to tell a held
// version from one not yet rolled out.
func (h Hold) On(ref update.Ref) bool {
	return h.Version == ref.Tag || (ref.Digest != "" && h.Version == ref.Tag+"@"+ref.Digest)
}

// History is the Git history holds are read from. internal/gitrepo
// implements it for kept clones (their fetched branches) and for checkouts
// (their local branches).
type History interface {
	// Walk calls fn with the SHA and message of each commit of branch,
	// newest first, as far as the history's bounds go or until fn returns
	// false. It reports false, without calling fn, when there is no such
	// branch.
	Walk(branch string, fn func(sha, message string) bool) (found bool, err error)
	// Message returns the message of the commit sha; found is false when the
	// repository does not have it.
	Message(sha string) (message string, found bool, err error)
}

var revertRE = regexp.MustCompile(`This reverts commit ([0-9a-f]{40}(?:[0-9a-f]{24})?)[.,]`)

// ReadHolds reads the holds on branch and, when pushBranch differs and
// exists, on pushBranch too, where a revert on a review branch lands. A
// missing branch is an error; a missing push branch has no holds (it is
// created by the first push).
//
// A commit whose message is in git's revert form (`This reverts commit
// <sha>.`) and that is not itself reverted holds every update its target
// commit lists in Uprev-Update trailers; a revert of a revert ends the first
// one's holds. A commit that records rejections (Uprev-Reject trailers,
// see RejectionMessage) and is not reverted holds each rejected version,
// with its reason. A version held more than once is held once, for the
// newest commit; a version held on both branches is listed once, for
// branch.
func ReadHolds(h History, branch, pushBranch string) ([]Hold, error) {
	holds, found, err := branchHolds(h, branch)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("branch %q not found", branch)
	}
	if pushBranch == "" || pushBranch == branch {
		return holds, nil
	}
	pushHolds, _, err := branchHolds(h, pushBranch)
	if err != nil {
		return nil, err
	}
	for _, p := range pushHolds {
		if !slices.ContainsFunc(holds, func(k Hold) bool { return k.Policy == p.Policy && k.Version == p.Version }) {
			holds = append(holds, p)
		}
	}
	return holds, nil
}

// revert is a commit that reverts target, or that records rejected
// versions.
type revert struct {
	commit, target string
	rejected       []Rejection
}

// branchHolds reads the holds on one branch; found is false when the
// branch does not exist.
func branchHolds(h History, branch string) (holds []Hold, found bool, err error) {
	var reverts []revert
	found, err = h.Walk(branch, func(sha, message string) bool {
		// A rejection's reason is text, never a revert form.
		if m := revertRE.FindStringSubmatch(withoutRejectReasons(message)); m != nil {
			reverts = append(reverts, revert{commit: sha, target: m[1]})
		}
		if rejected := ParseRejections(message); len(rejected) > 0 {
			reverts = append(reverts, revert{commit: sha, rejected: rejected})
		}
		return true
	})
	if err != nil {
		return nil, false, fmt.Errorf("walking the history of branch %q: %w", branch, err)
	}
	if !found {
		return nil, false, nil
	}
	revertedBy := map[string][]string{}
	for _, r := range reverts {
		if r.target != "" {
			revertedBy[r.target] = append(revertedBy[r.target], r.commit)
		}
	}
	effective := map[string]bool{}
	var isEffective func(string) bool
	isEffective = func(c string) bool {
		if e, ok := effective[c]; ok {
			return e
		}
		effective[c] = true
		for _, r := range revertedBy[c] {
			if isEffective(r) {
				effective[c] = false
				break
			}
		}
		return effective[c]
	}
	held := map[Update]bool{}
	for _, r := range reverts {
		if !isEffective(r.commit) {
			continue
		}
		for _, rj := range r.rejected {
			key := Update{Policy: rj.Policy, New: rj.Version}
			if !held[key] {
				held[key] = true
				holds = append(holds, Hold{Policy: rj.Policy, Version: rj.Version, RevertedIn: r.commit, Reason: rj.Reason})
			}
		}
		if r.target == "" {
			continue
		}
		message, ok, err := h.Message(r.target)
		if err != nil {
			return nil, true, fmt.Errorf("reading reverted commit %s: %w", r.target, err)
		}
		if !ok {
			continue // a commit that is not in this repository's history
		}
		for _, u := range ParseUpdateTrailers(message) {
			key := Update{Policy: u.Policy, New: u.New}
			if held[key] {
				continue
			}
			held[key] = true
			holds = append(holds, Hold{Policy: u.Policy, Version: u.New, RevertedIn: r.commit})
		}
	}
	return holds, true, nil
}
