package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// MaxUnmerged bounds the commits Unmerged reads: a branch with more
// commits that its base does not have is not one uprev wrote alone.
const MaxUnmerged = 100

// BranchCommit is a commit of a branch that its base does not have.
type BranchCommit struct {
	// SHA is the commit's.
	SHA string
	// AuthorName and AuthorEmail are who the commit says wrote it.
	AuthorName, AuthorEmail string
	// CommitterEmail is who the commit says committed it.
	CommitterEmail string
}

// Unmerged returns the commits of branch that base does not have, newest
// first; complete is false when there are more than MaxUnmerged (the
// first ones found are returned). found is false when there is no such
// branch; a base that is not found is an error.
func (h *History) Unmerged(branch, base string) (commits []BranchCommit, complete, found bool, err error) {
	tip, found, err := h.resolve(branch)
	if err != nil || !found {
		return nil, true, found, err
	}
	baseCommit, err := h.tipCommit(base)
	if err != nil {
		return nil, false, true, err
	}
	// The base's recent history, read at once; an older commit is asked
	// about on its own.
	inBase := map[plumbing.Hash]bool{}
	iter, err := h.repo.Log(&git.LogOptions{From: baseCommit.Hash, Order: git.LogOrderCommitterTime})
	if err != nil {
		return nil, false, true, fmt.Errorf("reading the history of %q: %w", base, err)
	}
	err = iter.ForEach(func(c *object.Commit) error {
		if len(inBase) == DefaultHistoryDepth {
			return storer.ErrStop
		}
		inBase[c.Hash] = true
		return nil
	})
	iter.Close()
	if err != nil {
		return nil, false, true, fmt.Errorf("reading the history of %q: %w", base, err)
	}
	var out []*object.Commit
	seen := map[plumbing.Hash]bool{}
	complete = true
	for queue := []plumbing.Hash{tip}; len(queue) > 0 && complete; {
		hash := queue[0]
		queue = queue[1:]
		if seen[hash] || inBase[hash] {
			continue
		}
		seen[hash] = true
		c, err := h.repo.CommitObject(hash)
		if err != nil {
			return nil, false, true, fmt.Errorf("reading commit %s: %w", hash, err)
		}
		if merged, err := c.IsAncestor(baseCommit); err != nil || merged {
			if err != nil {
				return nil, false, true, fmt.Errorf("reading the history of %q: %w", base, err)
			}
			continue
		}
		if len(out) == MaxUnmerged {
			complete = false
			continue
		}
		out = append(out, c)
		queue = append(queue, c.ParentHashes...)
	}
	slices.SortStableFunc(out, func(a, b *object.Commit) int { return b.Committer.When.Compare(a.Committer.When) })
	for _, c := range out {
		commits = append(commits, BranchCommit{SHA: c.Hash.String(), AuthorName: c.Author.Name, AuthorEmail: c.Author.Email, CommitterEmail: c.Committer.Email})
	}
	return commits, complete, true, nil
}

// Proposes reports whether merging branch into base would change base:
// whether a path that branch changed since the two diverged differs from
// base's. It is false for a branch whose changes are all in base, merged,
// squashed or rebased; true for one whose history has nothing in common
// with base's. A branch or base that is not found is an error.
func (h *History) Proposes(branch, base string) (bool, error) {
	tip, err := h.tipCommit(branch)
	if err != nil {
		return false, err
	}
	baseCommit, err := h.tipCommit(base)
	if err != nil {
		return false, err
	}
	bases, err := tip.MergeBase(baseCommit)
	if err != nil {
		return false, fmt.Errorf("finding where %q and %q diverged: %w", branch, base, err)
	}
	if len(bases) == 0 {
		return true, nil
	}
	trees := make([]*object.Tree, 3)
	for i, c := range []*object.Commit{bases[0], tip, baseCommit} {
		if trees[i], err = c.Tree(); err != nil {
			return false, fmt.Errorf("reading the tree of %s: %w", c.Hash, err)
		}
	}
	changes, err := object.DiffTree(trees[0], trees[1])
	if err != nil {
		return false, fmt.Errorf("comparing %q with where it left %q: %w", branch, base, err)
	}
	for _, ch := range changes {
		path := ch.To.Name
		if path == "" {
			path = ch.From.Name
		}
		ours, err := treeEntry(trees[1], path)
		if err != nil {
			return false, err
		}
		theirs, err := treeEntry(trees[2], path)
		if err != nil {
			return false, err
		}
		if ours != theirs {
			return true, nil
		}
	}
	return false, nil
}

// treeEntry returns the entry at path in tree, the zero entry when there
// is none.
func treeEntry(tree *object.Tree, path string) (object.TreeEntry, error) {
	e, err := tree.FindEntry(path)
	switch {
	case errors.Is(err, object.ErrEntryNotFound), errors.Is(err, object.ErrDirectoryNotFound):
		return object.TreeEntry{}, nil
	case err != nil:
		return object.TreeEntry{}, fmt.Errorf("reading %s: %w", path, err)
	}
	return object.TreeEntry{Name: path, Mode: e.Mode, Hash: e.Hash}, nil
}

// tipCommit returns the commit at the tip of branch; a branch that is not
// found is an error.
func (h *History) tipCommit(branch string) (*object.Commit, error) {
	hash, found, err := h.resolve(branch)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("branch %q not found", branch)
	}
	c, err := h.repo.CommitObject(hash)
	if err != nil {
		return nil, fmt.Errorf("reading the tip of %q: %w", branch, err)
	}
	return c, nil
}

// ErrBranchMoved means a branch to delete was no longer where the caller
// saw it: someone pushed to it in between. It is left as it is.
var ErrBranchMoved = errors.New("the branch moved")

// DeleteBranch deletes branch on the remote if it is at tip, within the
// remote's timeout: the deletion names the commit it removes, so that a
// branch someone pushed to in between is left as it is (ErrBranchMoved,
// also when the remote refuses for that reason). A branch already gone is
// no error. The session's fetched copy of the branch goes with it.
func (s *Session) DeleteBranch(ctx context.Context, branch, tip string) error {
	ref, expected := plumbing.NewBranchReferenceName(branch), plumbing.NewHash(tip)
	err := s.receivePack(ctx, "deleting a branch of", func(ctx context.Context, session transport.ReceivePackSession, adv *packp.AdvRefs) error {
		old, err := advertised(adv, ref)
		switch {
		case err != nil:
			return err
		case old.IsZero():
			return nil
		case old != expected:
			return fmt.Errorf("%w: %s is at %s, not %s", ErrBranchMoved, branch, old, expected)
		case !adv.Capabilities.Supports(capability.DeleteRefs):
			return fmt.Errorf("the remote does not let branches be deleted (no %s capability)", capability.DeleteRefs)
		}
		req := packp.NewReferenceUpdateRequestFromCapabilities(adv.Capabilities)
		_ = req.Capabilities.Set(capability.DeleteRefs) // a known capability without arguments
		req.Commands = []*packp.Command{{Name: ref, Old: expected, New: plumbing.ZeroHash}}
		status, err := session.ReceivePack(ctx, req)
		if err != nil {
			return err
		}
		if status != nil {
			return status.Error()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting branch %q: %w", branch, classify(err))
	}
	if branch == s.pushBranch && branch != s.branch {
		s.pushTip = plumbing.ZeroHash
	}
	return removeRef(s.repo, s.trackingRef(branch))
}
