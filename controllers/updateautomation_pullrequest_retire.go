package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/gitrepo"
)

// pullRequestClosedReason is the reason of the event that announces a
// pull request uprev closed.
const pullRequestClosedReason = "PullRequestClosed"

// retiredGroup is a group's branch that has nothing left to propose: the
// group is gone (its policies deleted or relabelled), or its changes are
// all in the base branch.
type retiredGroup struct {
	// group and branch are the group's.
	group, branch string
	// why says why the group has nothing left to propose.
	why string
	// deleted says the run deleted the branch; closed is the pull request
	// it closed, nil when none was open.
	deleted bool
	closed  *forge.PullRequest
	// left says why the branch and its pull request were left for a
	// person (commits uprev did not make); empty when they were retired.
	left string
}

// proposeOrRetire opens or updates a group's pull request; or, when the
// group's branch proposes nothing any more (its changes are all in the
// base branch, merged, squashed or rebased) and the run pushed nothing
// to it, retires the branch and its pull request (retireGroup).
func (r *UpdateAutomationReconciler) proposeOrRetire(ctx context.Context, run *automationRun) error {
	if run.group == nil || run.commit != "" || run.session.PushTip() == "" {
		return r.ensurePullRequest(ctx, run)
	}
	history := run.session.History(gitrepo.HistoryOptions{})
	base := fetchedBase(history, run.auto)
	proposes, err := history.Proposes(run.auto.PushBranch(), base)
	if err != nil {
		return gitError(fmt.Errorf("comparing %s with %s: %w", run.auto.PushBranch(), base, err))
	}
	if proposes {
		return r.ensurePullRequest(ctx, run)
	}
	return r.retireGroup(ctx, run, run.group.name, run.auto.PushBranch(), "its changes are all in "+base)
}

// retireGoneGroups retires the branches and pull requests of the groups
// status.pullRequests lists that the run no longer has: their policies
// were deleted or relabelled. A failure leaves the others to run, and is
// returned.
func (r *UpdateAutomationReconciler) retireGoneGroups(ctx context.Context, run *automationRun) error {
	var first error
	for _, pr := range run.auto.Status.PullRequests {
		if slices.Contains(run.groupNames, pr.Group) {
			continue
		}
		branch := pr.Branch
		if branch == "" {
			branch = groupBranch(run.auto.PushBranch(), pr.Group)
		}
		if err := run.session.UsePushBranch(ctx, branch); err != nil {
			first = cmp.Or(first, gitError(err))
			continue
		}
		if err := r.retireGroup(ctx, run, pr.Group, branch, "the group is gone (its policies were deleted or relabelled)"); err != nil {
			first = cmp.Or(first, err)
		}
	}
	return first
}

// retireGroup deletes the branch of a group that has nothing left to
// propose, the session's push branch, and closes its open pull request,
// unless the branch has commits uprev did not make (a person's work, a
// revert that holds a version): then both are left, and the run says so.
// The pull request is closed first (a forge may close it by itself when
// its branch goes, without saying why); the branch is then deleted only at
// the tip the run read, so that a commit pushed meanwhile is never lost:
// the branch is then left, and the run says so.
func (r *UpdateAutomationReconciler) retireGroup(ctx context.Context, run *automationRun, group, branch, why string) (err error) {
	auto := run.auto
	base := pullRequestBase(auto)
	if branch == auto.Spec.Git.Ref.Branch || branch == base {
		return nil
	}
	retired := retiredGroup{group: group, branch: branch, why: why}
	defer func() {
		if err == nil {
			run.retired = append(run.retired, retired)
		}
	}()
	tip := run.session.PushTip()
	if tip != "" {
		history := run.session.History(gitrepo.HistoryOptions{})
		commits, complete, _, err := history.Unmerged(branch, fetchedBase(history, auto))
		if err != nil {
			return gitError(fmt.Errorf("reading branch %s: %w", branch, err))
		}
		if retired.left = othersCommits(commits, complete, auto.Spec.Git.Commit.Author); retired.left != "" {
			return nil
		}
	}
	if retired.closed, err = r.closePullRequest(ctx, run, branch, why); err != nil {
		return err
	}
	if tip != "" {
		run.progress(ctx, "deleting branch %s: %s", branch, why)
		err = run.session.DeleteBranch(ctx, branch, tip)
		switch {
		case errors.Is(err, gitrepo.ErrBranchMoved):
			retired.left = "someone pushed to it meanwhile"
			return nil
		case err != nil:
			return gitError(err)
		}
		retired.deleted = true
	}
	ctrl.LoggerFrom(ctx).Info("Group retired", "group", group, "branch", branch, "why", why, "closed", retired.closed != nil, "deleted", retired.deleted)
	return nil
}

// closePullRequest closes the open pull request of branch, if there is
// one, and returns it.
func (r *UpdateAutomationReconciler) closePullRequest(ctx context.Context, run *automationRun, branch, why string) (closed *forge.PullRequest, err error) {
	auto := run.auto
	release, err := takeForgeShare(run.front.gitShares, r.Clock.Now(), client.ObjectKeyFromObject(auto), forgeAPIURL(auto.Spec.Git.Push.PullRequest))
	if err != nil {
		return nil, err
	}
	defer func() { release(err) }()
	f, _, err := r.pullRequestForge(ctx, run)
	if err != nil {
		return nil, err
	}
	pr, found, err := f.ClosePullRequest(ctx, branch, pullRequestBase(auto))
	if err != nil {
		return nil, pullRequestError(fmt.Errorf("closing the pull request of %s: %w", branch, err))
	}
	if !found {
		return nil, nil
	}
	r.Events.Eventf(run.front.object, nil, corev1.EventTypeNormal, pullRequestClosedReason, "PullRequest",
		"Closed pull request #%d from %s: %s", pr.Number, branch, why)
	return &pr, nil
}

// othersCommits says which of a branch's commits uprev did not make, as
// their author and committer say; empty when uprev made them all.
func othersCommits(commits []gitrepo.BranchCommit, complete bool, uprev uprevv1.CommitUser) string {
	if !complete {
		return fmt.Sprintf("it has more than %d commits its base does not have", gitrepo.MaxUnmerged)
	}
	var others []string
	for _, c := range commits {
		if c.AuthorName != uprev.Name || c.AuthorEmail != uprev.Email || c.CommitterEmail != uprev.Email {
			others = append(others, shortSHA(c.SHA))
		}
	}
	if len(others) == 0 {
		return ""
	}
	return fmt.Sprintf("it has commits uprev did not make (%s)", strings.Join(others, ", "))
}

// fetchedBase is the branch a group's branch is compared with: the pull
// request's base as fetched, or the checkout branch when the run does not
// fetch the base.
func fetchedBase(history *gitrepo.History, auto *uprevv1.UpdateAutomation) string {
	base := pullRequestBase(auto)
	if found, err := history.Walk(base, func(string, string) bool { return false }); err == nil && found {
		return base
	}
	return auto.Spec.Git.Ref.Branch
}

// summary is the part of the Ready message about a retired group, such
// as `closed pull request #4 and deleted branch
// uprev/updates-app (app): the group is gone (…)`, or what was left.
func (g retiredGroup) summary() string {
	switch {
	case g.left != "" && g.closed != nil:
		return fmt.Sprintf("closed pull request #%d (%s): %s; left branch %s for a person: %s", g.closed.Number, g.group, g.why, g.branch, g.left)
	case g.left != "":
		return fmt.Sprintf("left branch %s (%s) and its pull request for a person: %s, but %s", g.branch, g.group, g.why, g.left)
	}
	var done []string
	if g.closed != nil {
		done = append(done, fmt.Sprintf("closed pull request #%d", g.closed.Number))
	}
	if g.deleted {
		done = append(done, "deleted branch "+g.branch)
	}
	if len(done) == 0 {
		return ""
	}
	return fmt.Sprintf("%s (%s): %s", strings.Join(done, " and "), g.group, g.why)
}
