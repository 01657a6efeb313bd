package plan

import (
	"errors"
	"fmt"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/guard"
)

// ReadHolds reads the holds in the history of the Git repository at dir,
// with guard.ReadHolds as the controller does: on branch (HEAD's branch when
// empty, or HEAD's own history when HEAD is detached) and, when set and
// present, on pushBranch. It returns the branch it read. When dir is not in
// a Git repository there are no holds and branch is empty.
//
// A branch is read as the local branch, or as origin's when there is no
// local one: a plan is about the checkout, including reverts not pushed
// yet.
func ReadHolds(dir, branch, pushBranch string) (holds []guard.Hold, readBranch string, err error) {
	history, err := gitrepo.OpenCheckout(dir, gitrepo.HistoryOptions{})
	if errors.Is(err, gitrepo.ErrNotRepository) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if branch == "" {
		if branch, err = history.HeadBranch(); err != nil {
			return nil, "", fmt.Errorf("%s: %w", dir, err)
		}
	}
	holds, err = guard.ReadHolds(history, branch, pushBranch)
	if err != nil {
		return nil, "", fmt.Errorf("reading reverts in %s: %w", dir, err)
	}
	return holds, branch, nil
}
