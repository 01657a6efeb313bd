package gitrepo

import (
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// DefaultHistoryDepth is how many commits a History walks unless told
// otherwise.
const DefaultHistoryDepth = 1000

// DetachedHead is the branch name HeadBranch reports, and Walk reads the
// history of, when a checkout's HEAD is detached.
const DetachedHead = "HEAD"

// ErrNotRepository means a directory is in no Git repository.
var ErrNotRepository = errors.New("not in a Git repository")

// HistoryOptions bounds the history a History walks.
type HistoryOptions struct {
	// MaxCommits is how many commits to walk from the tip; zero means
	// DefaultHistoryDepth.
	MaxCommits int
	// Since, when set, is a commit SHA where the walk stops; it and its
	// history are not read.
	Since string
}

// History reads the history of a repository's branches, newest first and
// bounded, and commit messages by SHA: what internal/guard reads holds from
// (it implements guard.History). What a commit means is not its concern.
type History struct {
	repo *git.Repository
	opts HistoryOptions
	// refs returns the references that may name a branch, preferred first.
	refs func(branch string) []plumbing.ReferenceName
}

// History returns the history of the session's repository as fetched: a
// branch is its fetched tip, and a branch the remote does not have (a push
// branch not pushed yet) is not found. It is valid until Close.
func (s *Session) History(opts HistoryOptions) *History {
	return &History{repo: s.repo, opts: opts, refs: func(branch string) []plumbing.ReferenceName {
		return []plumbing.ReferenceName{s.trackingRef(branch)}
	}}
}

// OpenCheckout returns the history of the Git repository holding dir, a
// checkout or a directory in one. A branch is the local branch, so that
// commits not pushed yet count, or else its remote-tracking branch of
// origin; DetachedHead is HEAD. It fails with ErrNotRepository when dir is
// in no Git repository.
func OpenCheckout(dir string, opts HistoryOptions) (*History, error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotRepository)
	}
	if err != nil {
		return nil, fmt.Errorf("opening Git repository at %s: %w", dir, err)
	}
	return &History{repo: repo, opts: opts, refs: func(branch string) []plumbing.ReferenceName {
		if branch == DetachedHead {
			return []plumbing.ReferenceName{plumbing.HEAD}
		}
		return []plumbing.ReferenceName{plumbing.NewBranchReferenceName(branch), plumbing.NewRemoteReferenceName("origin", branch)}
	}}, nil
}

// HeadBranch returns the branch HEAD is on, or DetachedHead.
func (h *History) HeadBranch() (string, error) {
	head, err := h.repo.Head()
	if err != nil {
		return "", fmt.Errorf("reading HEAD: %w", err)
	}
	if head.Name().IsBranch() {
		return head.Name().Short(), nil
	}
	return DetachedHead, nil
}

// Walk calls fn with the SHA and message of each commit of branch, newest
// first (by committer time), until fn returns false, the walk has read
// MaxCommits commits or it reaches Since. It reports false, without calling
// fn, when there is no such branch.
func (h *History) Walk(branch string, fn func(sha, message string) bool) (bool, error) {
	tip, found, err := h.resolve(branch)
	if err != nil || !found {
		return false, err
	}
	limit := h.opts.MaxCommits
	if limit <= 0 {
		limit = DefaultHistoryDepth
	}
	since := plumbing.NewHash(h.opts.Since)
	iter, err := h.repo.Log(&git.LogOptions{From: tip, Order: git.LogOrderCommitterTime})
	if err != nil {
		return true, fmt.Errorf("reading the history of %s: %w", tip, err)
	}
	defer iter.Close()
	walked := 0
	err = iter.ForEach(func(c *object.Commit) error {
		if walked == limit || (h.opts.Since != "" && c.Hash == since) {
			return storer.ErrStop
		}
		walked++
		if !fn(c.Hash.String(), c.Message) {
			return storer.ErrStop
		}
		return nil
	})
	return true, err
}

// resolve returns the commit branch names.
func (h *History) resolve(branch string) (plumbing.Hash, bool, error) {
	for _, name := range h.refs(branch) {
		ref, err := h.repo.Reference(name, true)
		switch {
		case err == nil:
			return ref.Hash(), true, nil
		case !errors.Is(err, plumbing.ErrReferenceNotFound):
			return plumbing.ZeroHash, false, fmt.Errorf("resolving branch %q: %w", branch, err)
		}
	}
	return plumbing.ZeroHash, false, nil
}

// Message returns the message of the commit sha; found is false when the
// repository does not have it.
func (h *History) Message(sha string) (message string, found bool, err error) {
	c, err := h.commit(sha)
	if c == nil {
		return "", false, err
	}
	return c.Message, true, nil
}

// Author returns the author's name of the commit sha; found is false when
// the repository does not have it. Whoever made the commit wrote it: it
// is untrusted text for whatever shows it.
func (h *History) Author(sha string) (name string, found bool, err error) {
	c, err := h.commit(sha)
	if c == nil {
		return "", false, err
	}
	return c.Author.Name, true, nil
}

// commit is the commit sha, or nil (and no error) when the repository
// does not have it.
func (h *History) commit(sha string) (*object.Commit, error) {
	c, err := h.repo.CommitObject(plumbing.NewHash(sha))
	switch {
	case errors.Is(err, plumbing.ErrObjectNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading commit %s: %w", sha, err)
	}
	return c, nil
}
