package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/fluxcd/pkg/auth/githubapp"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/gitrepo"
)

// pullRequestOpenedReason is the reason of the event that announces a new
// pull request.
const pullRequestOpenedReason = "PullRequestOpened"

// forgeTokenKey is the key of a pull request Secret's API token.
const forgeTokenKey = "token"

// maxForgeRetryAfter bounds the wait a forge's rate limit asks for.
const maxForgeRetryAfter = time.Hour

// pullRequestRun is what the pull request phase of a run did.
type pullRequestRun struct {
	// head is the pushed commit the pull request was made for; empty when
	// the phase did not call the forge.
	head string
	// result is the pull request after a successful call, nil otherwise.
	result *forge.PullRequest
}

// validatePullRequest checks what the spec alone tells about
// spec.git.push.pullRequest; nil when it is not set. gitSecretNamespace
// is where spec.git.secretRef is read (see forgeSecretFallback).
func validatePullRequest(auto *uprevv1.UpdateAutomation, gitSecretNamespace string) error {
	git := auto.Spec.Git
	if git.Push == nil || git.Push.PullRequest == nil {
		return nil
	}
	pr := git.Push.PullRequest
	switch {
	case auto.PushBranch() == git.Ref.Branch:
		return stalledf(uprevv1.InvalidSpecReason,
			"spec.git.push.pullRequest needs spec.git.push.branch to differ from spec.git.ref.branch (%s): a pull request goes from the push branch into another", git.Ref.Branch)
	case pullRequestBase(auto) == auto.PushBranch():
		return stalledf(uprevv1.InvalidSpecReason, "spec.git.push.pullRequest.baseBranch is the push branch %s", auto.PushBranch())
	case pr.Provider == string(forge.Gitea) && pr.URL == "":
		return stalledf(uprevv1.InvalidSpecReason, "spec.git.push.pullRequest.url is required for provider gitea: the Gitea server's URL")
	case pr.SecretRef == nil && git.SecretRef == nil:
		return stalledf(uprevv1.InvalidSpecReason, "spec.git.push.pullRequest needs an API token: set its secretRef (key %q) or spec.git.secretRef", forgeTokenKey)
	}
	if _, err := pullRequestRepository(auto); err != nil {
		return stalled(uprevv1.InvalidSpecReason, err)
	}
	if err := validateGroupBy(pr.GroupBy); err != nil {
		return err
	}
	if pr.SecretRef == nil {
		return forgeSecretFallback(auto, gitSecretNamespace)
	}
	return nil
}

// forgeSecretFallback says whether a pull request without a secretRef of
// its own may authenticate with the Git Secret: a Git Secret is offered
// only to the Git host it belongs to, so the forge's API must run on the
// Git URL's host and the Secret be the automation's own namespace's (an
// ImageUpdateAutomation's GitRepository may be another namespace's).
// Otherwise the pull request needs its own secretRef, and the automation
// is Stalled saying so.
func forgeSecretFallback(auto *uprevv1.UpdateAutomation, gitSecretNamespace string) error {
	pr := auto.Spec.Git.Push.PullRequest
	switch {
	case gitSecretNamespace != auto.Namespace:
		return stalledf(uprevv1.InvalidSpecReason,
			"the pull request needs its own secretRef in namespace %s: the Git Secret is namespace %s's, used only for Git", auto.Namespace, gitSecretNamespace)
	case !forge.ServesGitHost(forge.Provider(pr.Provider), pr.URL, auto.Spec.Git.URL):
		api := pr.URL
		if api == "" {
			api = "the " + pr.Provider + " default"
		}
		return stalledf(uprevv1.InvalidSpecReason,
			"the pull request needs its own secretRef: its forge API (%s) is not on the Git host of %s, and the Git Secret is offered only to that host", api, auto.Spec.Git.URL)
	}
	return nil
}

// pullRequestBase is the branch the pull request goes into.
func pullRequestBase(auto *uprevv1.UpdateAutomation) string {
	if b := auto.Spec.Git.Push.PullRequest.BaseBranch; b != "" {
		return b
	}
	return auto.Spec.Git.Ref.Branch
}

// pullRequestRepository is the repository as owner/name: the spec's, or
// the path of the Git URL without .git.
func pullRequestRepository(auto *uprevv1.UpdateAutomation) (string, error) {
	if r := auto.Spec.Git.Push.PullRequest.Repository; r != "" {
		return r, nil
	}
	u, err := url.Parse(auto.Spec.Git.URL)
	if err != nil {
		return "", fmt.Errorf("spec.git.url: %w", err)
	}
	repo := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	if !strings.Contains(repo, "/") {
		return "", fmt.Errorf("spec.git.push.pullRequest.repository is required: the path of %s is not owner/name", auto.Spec.Git.URL)
	}
	return repo, nil
}

// pullRequestDue says whether the run must open or update the pull
// request, and for which commit: when it pushed; or when the push
// branch's tip in Git, pushTip, is not the commit the pull request was
// last made for: an earlier call failed, a person pushed to the branch, or
// the status the run read was written before the last run's (a cache not
// yet caught up, a restart). Git, not status alone, says what is due, so
// a call that failed is never forgotten; a call made twice for one commit
// updates the same pull request.
func pullRequestDue(auto *uprevv1.UpdateAutomation, pushed, pushTip string) (head string, due bool) {
	switch {
	case auto.Spec.Git.Push == nil || auto.Spec.Git.Push.PullRequest == nil:
		return "", false
	case pushed != "":
		return pushed, true
	case pushTip == "":
		return "", false
	case auto.Status.PullRequest != nil && auto.Status.PullRequest.HeadCommit == pushTip:
		return "", false
	}
	return pushTip, true
}

// ensurePullRequest opens or updates the pull request of the push branch
// after a push, or retries the one an earlier push left due. A failure is
// PullRequestFailed and retried with backoff, or after the wait the
// forge's rate limit asks for; the pushed commit is kept either way.
func (r *UpdateAutomationReconciler) ensurePullRequest(ctx context.Context, run *automationRun) (err error) {
	auto := run.auto
	head, due := pullRequestDue(auto, run.commit, run.session.PushTip())
	if !due {
		return nil
	}
	spec := auto.Spec.Git.Push.PullRequest
	release, err := takeForgeShare(run.front.gitShares, r.Clock.Now(), client.ObjectKeyFromObject(auto), forgeAPIURL(spec))
	if err != nil {
		return err
	}
	defer func() { release(err) }()
	run.pr.head = head
	f, token, err := r.pullRequestForge(ctx, run)
	if err != nil {
		return err
	}
	title, desc, err := pullRequestDescription(run, head)
	if err != nil {
		return gitError(err)
	}
	if run.group != nil {
		title = groupTitle(title, spec.GroupBy, run.group.name)
	}
	run.progress(ctx, "opening or updating the pull request of %s", auto.PushBranch())
	pr, err := f.EnsurePullRequest(ctx, forge.PullRequestSpec{
		Head: auto.PushBranch(), Base: pullRequestBase(auto), Title: title, Body: r.pullRequestBody(ctx, run, desc, forgeNotesAPI(spec, token)),
		Labels: spec.Labels, Reviewers: spec.Reviewers,
	})
	if err != nil {
		return pullRequestError(fmt.Errorf("pull request of %s for %s: %w", auto.PushBranch(), shortSHA(head), err))
	}
	run.pr.result = &pr
	if pr.Created {
		r.Events.Eventf(run.front.object, nil, corev1.EventTypeNormal, pullRequestOpenedReason, "PullRequest",
			"Opened pull request #%d from %s: %s", pr.Number, auto.PushBranch(), pr.URL)
	}
	ctrl.LoggerFrom(ctx).Info("Pull request up to date", "number", pr.Number, "url", pr.URL, "created", pr.Created, "commit", head)
	return nil
}

// pullRequestForge is the client of the forge of the automation's pull
// requests, with its token.
func (r *UpdateAutomationReconciler) pullRequestForge(ctx context.Context, run *automationRun) (forge.Forge, string, error) {
	spec := run.auto.Spec.Git.Push.PullRequest
	token, err := r.forgeToken(ctx, run)
	if err != nil {
		return nil, "", err
	}
	repo, _ := pullRequestRepository(run.auto)
	f, err := forge.New(forge.Config{Provider: forge.Provider(spec.Provider), URL: spec.URL, Repository: repo, Token: token, HTTPClient: r.Forges, Clock: r.Clock})
	if err != nil {
		return nil, "", stalled(uprevv1.InvalidSpecReason, fmt.Errorf("spec.git.push.pullRequest: %w", err))
	}
	return f, token, nil
}

// forgeAPIURL is the API of the pull request's forge: spec.url, or its
// provider's default.
func forgeAPIURL(spec *uprevv1.PullRequestSpec) string {
	switch {
	case spec.URL != "":
		return spec.URL
	case spec.Provider == string(forge.GitLab):
		return forge.DefaultGitLabURL
	}
	return forge.DefaultGitHubURL
}

// forgeTimeout bounds each call to a forge's API.
const forgeTimeout = 30 * time.Second

// pullRequestError makes a forge failure PullRequestFailed, retried after
// the wait a rate limit asked for, or else with backoff.
func pullRequestError(err error) error {
	var apiErr *forge.APIError
	if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
		return transientAfter(uprevv1.PullRequestFailedReason, err, min(apiErr.RetryAfter, maxForgeRetryAfter))
	}
	return transient(uprevv1.PullRequestFailedReason, err)
}

// forgeToken returns the API token: the pull request Secret's `token` or
// GitHub App installation token, or else, where forgeSecretFallback
// allows it, the Git Secret's bearerToken, password or GitHub App
// installation token. It is never logged.
func (r *UpdateAutomationReconciler) forgeToken(ctx context.Context, run *automationRun) (string, error) {
	auto := run.auto
	spec := auto.Spec.Git.Push.PullRequest
	ref, field, namespace := spec.SecretRef, "spec.git.push.pullRequest.secretRef", auto.Namespace
	if ref == nil {
		if err := forgeSecretFallback(auto, run.front.gitSecretNamespace); err != nil {
			return "", err
		}
		ref, field, namespace = auto.Spec.Git.SecretRef, "spec.git.secretRef", run.front.gitSecretNamespace
	}
	data, err := secretData(ctx, r.Client, namespace, ref.Name)
	if err != nil {
		return "", err
	}
	if gitrepo.IsGitHubApp(data) {
		if spec.Provider != string(forge.GitHub) {
			return "", transient(uprevv1.InvalidSpecReason, fmt.Errorf("%s %s: a GitHub App authenticates provider github only", field, ref.Name))
		}
		apiURL := spec.URL
		if apiURL == "" {
			apiURL = forge.DefaultGitHubURL
		}
		app := gitrepo.GitHubApp{Tokens: r.TokenCache, Kind: run.front.kind, Name: auto.Name, Namespace: auto.Namespace}
		creds, err := app.Credentials(ctx, apiURL, data)
		if err != nil {
			return "", gitError(err)
		}
		return string(creds[gitrepo.SecretPassword]), nil
	}
	keys := []string{forgeTokenKey}
	if spec.SecretRef == nil {
		keys = []string{gitrepo.SecretBearerToken, gitrepo.SecretPassword}
	}
	for _, key := range keys {
		if t := data[key]; len(t) > 0 {
			return string(t), nil
		}
	}
	return "", transient(uprevv1.InvalidSpecReason, fmt.Errorf("%s %s has no %s (nor %s)", field, ref.Name, strings.Join(keys, " or "), githubapp.KeyAppID))
}

// pullRequestStatus is status.pullRequest after a run: the pull request a
// successful call returned, with the commit it was made for. After a call
// that failed, the previous one, whose headCommit lags lastPushCommit and
// so marks the call as still due; an empty one when there was none yet.
func pullRequestStatus(prev *uprevv1.PullRequestStatus, run *automationRun) *uprevv1.PullRequestStatus {
	switch {
	case run.pr.result != nil:
		return &uprevv1.PullRequestStatus{URL: run.pr.result.URL, Number: run.pr.result.Number,
			State: string(run.pr.result.State), HeadCommit: run.pr.head}
	case run.pr.head != "" && prev == nil:
		return &uprevv1.PullRequestStatus{}
	default:
		return prev
	}
}

// pullRequestSummary is the part of the Ready message about the pull
// request, empty when the run made no call.
func (run *automationRun) pullRequestSummary() string {
	if run.pr.result == nil {
		return ""
	}
	verb := "updated"
	if run.pr.result.Created {
		verb = "opened"
	}
	if run.group != nil && run.group.name != "" {
		return fmt.Sprintf("%s pull request #%d (%s)", verb, run.pr.result.Number, run.group.name)
	}
	return fmt.Sprintf("%s pull request #%d", verb, run.pr.result.Number)
}
