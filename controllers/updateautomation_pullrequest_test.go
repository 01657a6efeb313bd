package controllers

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/forge"
)

// TestPullRequestStatus: status.pullRequest records the pull request a call
// returned with the commit it was made for; a failed call leaves the
// previous one, so that headCommit lags lastPushCommit and the call stays
// due.
func TestPullRequestStatus(t *testing.T) {
	prev := &uprevv1.PullRequestStatus{URL: "https://forge/pr/1", Number: 1, State: "open", HeadCommit: "aaa"}
	opened := &forge.PullRequest{Number: 2, URL: "https://forge/pr/2", State: forge.StateOpen, Created: true}
	for _, tc := range []struct {
		name string
		prev *uprevv1.PullRequestStatus
		run  pullRequestRun
		want *uprevv1.PullRequestStatus
	}{
		{name: "no call, none before", want: nil},
		{name: "no call", prev: prev, want: prev},
		{name: "call made", prev: prev, run: pullRequestRun{head: "bbb", result: opened},
			want: &uprevv1.PullRequestStatus{URL: "https://forge/pr/2", Number: 2, State: "open", HeadCommit: "bbb"}},
		{name: "call failed: the previous pull request, its head lagging", prev: prev, run: pullRequestRun{head: "bbb"}, want: prev},
		{name: "first call failed: an empty status marks it due", run: pullRequestRun{head: "bbb"}, want: &uprevv1.PullRequestStatus{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(pullRequestStatus(tc.prev, &automationRun{pr: tc.run})).To(Equal(tc.want))
		})
	}
}

// TestPullRequestDue: the forge is called after a push, and after a push
// whose call failed until one succeeds; never when nothing was pushed.
func TestPullRequestDue(t *testing.T) {
	withPR := func(st uprevv1.UpdateAutomationStatus) *uprevv1.UpdateAutomation {
		a := pullRequestAutomation(nil)
		a.Status = st
		return a
	}
	for _, tc := range []struct {
		name    string
		auto    *uprevv1.UpdateAutomation
		pushed  string
		pushTip string
		head    string
		due     bool
	}{
		{name: "no pullRequest in spec", auto: &uprevv1.UpdateAutomation{}, pushed: "bbb", pushTip: "bbb"},
		{name: "pushed", auto: withPR(uprevv1.UpdateAutomationStatus{}), pushed: "bbb", pushTip: "bbb", head: "bbb", due: true},
		{name: "nothing pushed, nothing due", auto: withPR(uprevv1.UpdateAutomationStatus{LastPushCommit: "aaa",
			PullRequest: &uprevv1.PullRequestStatus{HeadCommit: "aaa"}}), pushTip: "aaa"},
		{name: "no push branch", auto: withPR(uprevv1.UpdateAutomationStatus{LastPushCommit: "aaa"})},
		{name: "a push branch without pull request yet", auto: withPR(uprevv1.UpdateAutomationStatus{LastPushCommit: "aaa"}),
			pushTip: "aaa", head: "aaa", due: true},
		{name: "an earlier call failed", auto: withPR(uprevv1.UpdateAutomationStatus{LastPushCommit: "bbb",
			PullRequest: &uprevv1.PullRequestStatus{Number: 1, HeadCommit: "aaa"}}), pushTip: "bbb", head: "bbb", due: true},
		{name: "the first call failed", auto: withPR(uprevv1.UpdateAutomationStatus{LastPushCommit: "bbb",
			PullRequest: &uprevv1.PullRequestStatus{}}), pushTip: "bbb", head: "bbb", due: true},
		{name: "status read before the failed run's was written", auto: withPR(uprevv1.UpdateAutomationStatus{}),
			pushTip: "bbb", head: "bbb", due: true},
		{name: "a person pushed to the branch", auto: withPR(uprevv1.UpdateAutomationStatus{LastPushCommit: "aaa",
			PullRequest: &uprevv1.PullRequestStatus{Number: 1, HeadCommit: "aaa"}}), pushTip: "ccc", head: "ccc", due: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			head, due := pullRequestDue(tc.auto, tc.pushed, tc.pushTip)
			g.Expect(due).To(Equal(tc.due))
			g.Expect(head).To(Equal(tc.head))
		})
	}
}

// pullRequestAutomation is an automation in namespace apps of
// https://git.example.com/acme/fleet.git pushing to uprev/updates with a
// pull request on that host's GitHub Enterprise, changed by mutate.
func pullRequestAutomation(mutate func(*uprevv1.UpdateAutomation)) *uprevv1.UpdateAutomation {
	a := &uprevv1.UpdateAutomation{Spec: uprevv1.UpdateAutomationSpec{Git: uprevv1.GitSpec{
		GitSource: uprevv1.GitSource{URL: "https://git.example.com/acme/fleet.git", Ref: uprevv1.GitRef{Branch: "main"},
			SecretRef: &meta.LocalObjectReference{Name: "git"}},
		Push: &uprevv1.PushSpec{Branch: "uprev/updates", PullRequest: &uprevv1.PullRequestSpec{Provider: "github", URL: "https://git.example.com/api/v3/"}},
	}}}
	a.Namespace = "apps"
	if mutate != nil {
		mutate(a)
	}
	return a
}

// TestValidatePullRequest: a pull request spec that cannot work is
// Stalled InvalidSpec with a message that says what to change.
func TestValidatePullRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*uprevv1.UpdateAutomation)
		// secretNamespace is where spec.git.secretRef is read; apps when empty.
		secretNamespace string
		err             string
	}{
		{name: "valid"},
		{name: "the Git Secret goes to no other host", mutate: func(a *uprevv1.UpdateAutomation) {
			a.Spec.Git.Push.PullRequest.URL = "https://forge.example.com/api/v3/"
		},
			err: "the pull request needs its own secretRef: its forge API (https://forge.example.com/api/v3/) is not on the Git host"},
		{name: "nor to GitHub's API for another Git host", mutate: func(a *uprevv1.UpdateAutomation) { a.Spec.Git.Push.PullRequest.URL = "" },
			err: "its forge API (the github default) is not on the Git host"},
		{name: "GitHub's API for github.com", mutate: func(a *uprevv1.UpdateAutomation) {
			a.Spec.Git.URL, a.Spec.Git.Push.PullRequest.URL = "https://github.com/acme/fleet.git", ""
		}},
		{name: "another namespace's Git Secret goes to no forge", secretNamespace: "team",
			err: "the pull request needs its own secretRef in namespace apps: the Git Secret is namespace team's"},
		{name: "its own Secret for another host", secretNamespace: "team", mutate: func(a *uprevv1.UpdateAutomation) {
			a.Spec.Git.Push.PullRequest.URL = "https://forge.example.com/api/v3/"
			a.Spec.Git.Push.PullRequest.SecretRef = &meta.LocalObjectReference{Name: "forge"}
		}},
		{name: "no pull request", mutate: func(a *uprevv1.UpdateAutomation) { a.Spec.Git.Push.PullRequest = nil }},
		{name: "push branch is the checkout branch", mutate: func(a *uprevv1.UpdateAutomation) { a.Spec.Git.Push.Branch = "main" },
			err: "spec.git.push.pullRequest needs spec.git.push.branch to differ from spec.git.ref.branch (main)"},
		{name: "base is the push branch", mutate: func(a *uprevv1.UpdateAutomation) { a.Spec.Git.Push.PullRequest.BaseBranch = "uprev/updates" },
			err: "baseBranch is the push branch"},
		{name: "gitea without URL", mutate: func(a *uprevv1.UpdateAutomation) {
			a.Spec.Git.Push.PullRequest.Provider, a.Spec.Git.Push.PullRequest.URL = "gitea", ""
		},
			err: "spec.git.push.pullRequest.url is required for provider gitea"},
		{name: "no token anywhere", mutate: func(a *uprevv1.UpdateAutomation) { a.Spec.Git.SecretRef = nil },
			err: "needs an API token"},
		{name: "a token of its own", mutate: func(a *uprevv1.UpdateAutomation) {
			a.Spec.Git.SecretRef = nil
			a.Spec.Git.Push.PullRequest.SecretRef = &meta.LocalObjectReference{Name: "forge"}
		}},
		{name: "repository not in the URL", mutate: func(a *uprevv1.UpdateAutomation) { a.Spec.Git.URL = "https://git.example.com/fleet.git" },
			err: "spec.git.push.pullRequest.repository is required"},
		{name: "repository given", mutate: func(a *uprevv1.UpdateAutomation) {
			a.Spec.Git.URL = "https://git.example.com/fleet.git"
			a.Spec.Git.Push.PullRequest.Repository = "acme/fleet"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := tc.secretNamespace
			if ns == "" {
				ns = "apps"
			}
			err := validatePullRequest(pullRequestAutomation(tc.mutate), ns)
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			var stall *stalledError
			g.Expect(err).To(BeAssignableToTypeOf(stall))
			g.Expect(err.(*stalledError).reason).To(Equal(uprevv1.InvalidSpecReason))
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
		})
	}
}

// TestPullRequestRepository: owner/name from the Git URL's path, groups
// kept for GitLab, .git dropped.
func TestPullRequestRepository(t *testing.T) {
	for url, want := range map[string]string{
		"https://github.com/acme/fleet.git":               "acme/fleet",
		"https://gitlab.com/platform/team/fleet.git":      "platform/team/fleet",
		"ssh://git@gitea.example.com:2222/acme/fleet.git": "acme/fleet",
		"http://127.0.0.1:3000/acme/fleet":                "acme/fleet",
	} {
		got, err := pullRequestRepository(pullRequestAutomation(func(a *uprevv1.UpdateAutomation) { a.Spec.Git.URL = url }))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(got).To(Equal(want), url)
	}
}
