package plan

import (
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage"

	"github.com/uprev-dev/uprev/internal/gitrepo"
)

// detachedHead is the branch name ReadHolds reports, and reads the history
// of, when HEAD is detached and no branch was given.
const detachedHead = "HEAD"

// ReadHolds reads the holds on branch (HEAD's branch when empty, or HEAD's
// history when HEAD is detached) of the Git repository at dir, with
// gitrepo.Holds. It returns the branch it read. When dir is not in a Git
// repository there are no holds and branch is empty.
//
// The local branch is read, not its remote-tracking branch: a plan is about
// the checkout, including reverts not pushed yet.
func ReadHolds(dir, branch string) (holds []gitrepo.Hold, readBranch string, err error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("opening Git repository at %s: %w", dir, err)
	}
	local := &localBranches{Storer: repo.Storer}
	if branch == "" {
		head, err := repo.Head()
		if err != nil {
			return nil, "", fmt.Errorf("reading HEAD of %s: %w", dir, err)
		}
		if head.Name().IsBranch() {
			branch = head.Name().Short()
		} else {
			branch = detachedHead
			local.detached = plumbing.NewHashReference(plumbing.NewBranchReferenceName(detachedHead), head.Hash())
		}
	}
	local.hide = plumbing.NewRemoteReferenceName("origin", branch)
	view, err := git.Open(local, nil)
	if err != nil {
		return nil, "", fmt.Errorf("opening Git repository at %s: %w", dir, err)
	}
	holds, err = gitrepo.Holds(view, branch, gitrepo.HoldOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("reading reverts in %s: %w", dir, err)
	}
	return holds, branch, nil
}

// localBranches is a view of a repository's storage in which a branch's
// remote-tracking ref does not exist, so that gitrepo.Holds reads the local
// branch; for a detached HEAD it also answers a branch named HEAD.
type localBranches struct {
	storage.Storer
	hide     plumbing.ReferenceName
	detached *plumbing.Reference
}

// Reference returns the named reference, hiding the remote-tracking ref and
// answering the detached HEAD's stand-in branch.
func (s *localBranches) Reference(name plumbing.ReferenceName) (*plumbing.Reference, error) {
	switch {
	case name == s.hide:
		return nil, plumbing.ErrReferenceNotFound
	case s.detached != nil && name == s.detached.Name():
		return s.detached, nil
	}
	return s.Storer.Reference(name)
}
