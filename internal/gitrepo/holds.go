package gitrepo

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// UpdateTrailerKey is the key of the trailer an automation commit carries
// for each change it makes.
const UpdateTrailerKey = "Uprev-Update"

// DefaultHoldsDepth is how many commits Holds walks unless told otherwise.
const DefaultHoldsDepth = 1000

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

// Hold is a version of a policy that a revert on the branch rolled back: the
// automation must not write it again.
type Hold struct {
	// Policy is the ImagePolicy as namespace/name.
	Policy string
	// Version is the reverted version.
	Version string
	// RevertedIn is the SHA of the revert commit.
	RevertedIn string
}

// HoldOptions bounds the history Holds walks.
type HoldOptions struct {
	// MaxCommits is how many commits to walk from the tip; zero means
	// DefaultHoldsDepth.
	MaxCommits int
	// Since, when set, is a commit SHA where the walk stops; it and its
	// history are not read.
	Since string
}

var (
	updateTrailerRE = regexp.MustCompile(`(?m)^` + UpdateTrailerKey + `:[ \t]+(\S+)[ \t]+(?:(\S+)[ \t]+)?-->[ \t]+(\S+)[ \t]*$`)
	revertRE        = regexp.MustCompile(`This reverts commit ([0-9a-f]{40}(?:[0-9a-f]{24})?)[.,]`)
)

// FormatUpdateTrailer returns the trailer line for u, without a newline:
// `Uprev-Update: <namespace>/<policy> <old> --> <new>`. Fields must not
// contain white space; an empty Old is left out.
func FormatUpdateTrailer(u Update) string {
	if u.Old == "" {
		return fmt.Sprintf("%s: %s --> %s", UpdateTrailerKey, u.Policy, u.New)
	}
	return fmt.Sprintf("%s: %s %s --> %s", UpdateTrailerKey, u.Policy, u.Old, u.New)
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

// Holds walks the history of branch in repo (its tip fetched from the
// remote origin, or the local branch when it was not fetched), newest first and bounded by opts, for
// commits in git's revert form (`This reverts commit <sha>.`). Each revert
// that is not itself reverted holds every update its target commit lists in
// Uprev-Update trailers; a revert of a revert ends the first one's holds. A
// version reverted more than once is held once, for the newest revert.
func Holds(repo *git.Repository, branch string, opts HoldOptions) ([]Hold, error) {
	tip, err := repo.Reference(plumbing.NewRemoteReferenceName("origin", branch), true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		tip, err = repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	}
	if err != nil {
		return nil, fmt.Errorf("resolving branch %q: %w", branch, err)
	}
	return holdsAt(repo, tip.Hash(), branch, opts)
}

// holdsAt is Holds on the history of tip, the tip of branch.
func holdsAt(repo *git.Repository, tip plumbing.Hash, branch string, opts HoldOptions) ([]Hold, error) {
	reverts, err := findReverts(repo, tip, opts)
	if err != nil {
		return nil, fmt.Errorf("walking the history of branch %q: %w", branch, err)
	}
	revertedBy := map[plumbing.Hash][]plumbing.Hash{}
	for _, r := range reverts {
		revertedBy[r.target] = append(revertedBy[r.target], r.commit)
	}
	effective := map[plumbing.Hash]bool{}
	var isEffective func(plumbing.Hash) bool
	isEffective = func(c plumbing.Hash) bool {
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
	var holds []Hold
	held := map[Update]bool{}
	for _, r := range reverts {
		if !isEffective(r.commit) {
			continue
		}
		target, err := repo.CommitObject(r.target)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			continue // a commit that is not in this repository's history
		}
		if err != nil {
			return nil, fmt.Errorf("reading reverted commit %s: %w", r.target, err)
		}
		for _, u := range ParseUpdateTrailers(target.Message) {
			key := Update{Policy: u.Policy, New: u.New}
			if held[key] {
				continue
			}
			held[key] = true
			holds = append(holds, Hold{Policy: u.Policy, Version: u.New, RevertedIn: r.commit.String()})
		}
	}
	return holds, nil
}

// Holds returns the holds on the session's branch and, when it differs and
// exists, on its push branch, where a revert on a review branch lands; see
// the function Holds. A version held on both is listed once, for the
// branch.
func (s *Session) Holds(opts HoldOptions) ([]Hold, error) {
	holds, err := holdsAt(s.repo, s.branchTip(), s.branch, opts)
	if err != nil || s.pushBranch == s.branch || s.pushTip.IsZero() {
		return holds, err
	}
	pushHolds, err := holdsAt(s.repo, s.pushTip, s.pushBranch, opts)
	if err != nil {
		return nil, fmt.Errorf("reading reverts on branch %q: %w", s.pushBranch, err)
	}
	for _, h := range pushHolds {
		if !slices.ContainsFunc(holds, func(k Hold) bool { return k.Policy == h.Policy && k.Version == h.Version }) {
			holds = append(holds, h)
		}
	}
	return holds, nil
}

// revert is a commit that reverts target.
type revert struct {
	commit, target plumbing.Hash
}

// findReverts returns the revert commits in the bounded history of tip,
// newest first.
func findReverts(repo *git.Repository, tip plumbing.Hash, opts HoldOptions) ([]revert, error) {
	limit := opts.MaxCommits
	if limit <= 0 {
		limit = DefaultHoldsDepth
	}
	since := plumbing.NewHash(opts.Since)
	iter, err := repo.Log(&git.LogOptions{From: tip, Order: git.LogOrderCommitterTime})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var reverts []revert
	walked := 0
	err = iter.ForEach(func(c *object.Commit) error {
		if walked == limit || (opts.Since != "" && c.Hash == since) {
			return storer.ErrStop
		}
		walked++
		if m := revertRE.FindStringSubmatch(c.Message); m != nil {
			reverts = append(reverts, revert{commit: c.Hash, target: plumbing.NewHash(m[1])})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return reverts, nil
}
