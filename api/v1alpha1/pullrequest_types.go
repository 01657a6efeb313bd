package v1alpha1

import (
	"github.com/fluxcd/pkg/apis/meta"
)

// PullRequestFailedReason: the commit was pushed, but the forge refused or
// failed the call that opens or updates its pull request; retried with
// backoff (after the wait a rate limit asks for), without a new push.
const PullRequestFailedReason = "PullRequestFailed"

// PullRequestAnnotation, set on a Flux ImageUpdateAutomation to a
// PullRequestSpec in JSON (or YAML), such as `{"provider": "github"}`, does
// for it what spec.git.push.pullRequest does for an UpdateAutomation:
// Flux's kind has no field for it.
const PullRequestAnnotation = "uprev.dev/pull-request"

// PullRequestSpec opens or updates one pull request (merge request) from
// the push branch into the base branch after each push.
type PullRequestSpec struct {
	// Provider is the forge's API: github, gitlab or gitea.
	// +kubebuilder:validation:Enum=github;gitlab;gitea
	// +required
	Provider string `json:"provider"`

	// URL of the forge's API. github: the REST API root, default
	// https://api.github.com/ (GitHub Enterprise Server:
	// https://<host>/api/v3/). gitlab: the instance, default
	// https://gitlab.com. gitea: the server's URL, required.
	// +kubebuilder:validation:Pattern="^https?://.*$"
	// +optional
	URL string `json:"url,omitempty"`

	// Repository is the repository as owner/name (GitLab: the project's
	// full path, groups included). Default: the path of spec.git.url,
	// without `.git`.
	// +optional
	Repository string `json:"repository,omitempty"`

	// SecretRef names a Secret in the automation's namespace with the API
	// token in `token`, or (github) a GitHub App with Flux's keys
	// githubAppID, githubAppInstallationID, githubAppPrivateKey and
	// optionally githubAppBaseURL. Default: the Git Secret of spec.git,
	// whose `bearerToken`, `password` or GitHub App is used.
	// +optional
	SecretRef *meta.LocalObjectReference `json:"secretRef,omitempty"`

	// BaseBranch is the branch the pull request goes into. Default: the
	// checkout branch, spec.git.ref.branch.
	// +optional
	BaseBranch string `json:"baseBranch,omitempty"`

	// Labels are added to the pull request.
	// +optional
	Labels []string `json:"labels,omitempty"`

	// Reviewers are user names asked for a review.
	// +optional
	Reviewers []string `json:"reviewers,omitempty"`

	// GroupBy opens one pull request per group of changes, each from a
	// branch of its own, `<push branch>-<group>`, with the group in its
	// title: none (the default) groups nothing, one pull request from the
	// push branch; policy makes each ImagePolicy (and ReleaseSource) a
	// group, named after it; any other value is a label key, and the
	// policies with the same value of that label make a group named after
	// the value, while those without the label stay on the push branch.
	// A newer version updates its group's pull request in place.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	GroupBy string `json:"groupBy,omitempty"`
}

// GroupByNone and GroupByPolicy are the values of
// PullRequestSpec.GroupBy that are not label keys.
const (
	GroupByNone   = "none"
	GroupByPolicy = "policy"
)

// PullRequestStatus is the pull request of the push branch as last seen.
type PullRequestStatus struct {
	// Group is the group of changes the pull request is for (see
	// PullRequestSpec.GroupBy); empty for the push branch's own.
	// +optional
	Group string `json:"group,omitempty"`

	// Branch is the branch the pull request goes from, when it is a
	// group's.
	// +optional
	Branch string `json:"branch,omitempty"`

	// URL is the pull request's web page.
	// +optional
	URL string `json:"url,omitempty"`

	// Number is the pull request's number (GitLab: the merge request's IID).
	// +optional
	Number int64 `json:"number,omitempty"`

	// State is open, closed or merged, as of the last call.
	// +optional
	State string `json:"state,omitempty"`

	// HeadCommit is the pushed commit the pull request was last opened or
	// updated for. While it differs from status.lastPushCommit, the
	// pull request is still due, and each run tries again.
	// +optional
	HeadCommit string `json:"headCommit,omitempty"`
}
