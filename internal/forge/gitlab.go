package forge

import (
	"k8s.io/utils/clock"

	"context"
	"fmt"
	"net/http"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// gitlabForge opens merge requests through GitLab's REST API (v4).
type gitlabForge struct {
	client  *gitlab.Client
	project string
	clock   clock.PassiveClock
}

func newGitLab(cfg Config) (*gitlabForge, error) {
	base := cfg.URL
	if base == "" {
		base = DefaultGitLabURL
	}
	// The client's own retries are off: a failed call is reported, and the
	// controller retries with its backoff, after the wait GitLab asked for.
	client, err := gitlab.NewClient(cfg.Token, gitlab.WithBaseURL(base), gitlab.WithHTTPClient(cfg.HTTPClient), gitlab.WithoutRetries())
	if err != nil {
		return nil, fmt.Errorf("%w: GitLab URL %q: %w", ErrInvalidConfig, base, err)
	}
	return &gitlabForge{client: client, project: cfg.Repository, clock: cfg.Clock}, nil
}

// EnsurePullRequest finds the open merge request of spec.Head (GET
// /projects/:id/merge_requests?source_branch=&target_branch=&state=opened)
// and updates it (PUT), or opens one (POST).
func (f *gitlabForge) EnsurePullRequest(ctx context.Context, spec PullRequestSpec) (PullRequest, error) {
	with := gitlab.WithContext(ctx)
	reviewers, err := f.userIDs(ctx, spec.Reviewers)
	if err != nil {
		return PullRequest{}, err
	}
	open, resp, err := f.client.MergeRequests.ListProjectMergeRequests(f.project, &gitlab.ListProjectMergeRequestsOptions{
		State: gitlab.Ptr("opened"), SourceBranch: gitlab.Ptr(spec.Head), TargetBranch: gitlab.Ptr(spec.Base),
	}, with)
	if err != nil {
		return PullRequest{}, f.gitlabError("listing open merge requests", resp, err)
	}
	var labels *gitlab.LabelOptions
	if len(spec.Labels) > 0 {
		labels = gitlab.Ptr(gitlab.LabelOptions(spec.Labels))
	}
	var ids *[]int64
	if len(reviewers) > 0 {
		ids = &reviewers
	}
	if len(open) > 0 {
		mr, resp, err := f.client.MergeRequests.UpdateMergeRequest(f.project, open[0].IID, &gitlab.UpdateMergeRequestOptions{
			Title: gitlab.Ptr(spec.Title), Description: gitlab.Ptr(spec.Body), AddLabels: labels, ReviewerIDs: ids,
		}, with)
		if err != nil {
			return PullRequest{}, f.gitlabError(fmt.Sprintf("updating merge request !%d", open[0].IID), resp, err)
		}
		return PullRequest{Number: mr.IID, URL: mr.WebURL, State: gitlabState(mr.State)}, nil
	}
	mr, resp, err := f.client.MergeRequests.CreateMergeRequest(f.project, &gitlab.CreateMergeRequestOptions{
		Title: gitlab.Ptr(spec.Title), Description: gitlab.Ptr(spec.Body),
		SourceBranch: gitlab.Ptr(spec.Head), TargetBranch: gitlab.Ptr(spec.Base),
		Labels: labels, ReviewerIDs: ids,
	}, with)
	if err != nil {
		return PullRequest{}, f.gitlabError("opening a merge request", resp, err)
	}
	return PullRequest{Number: mr.IID, URL: mr.WebURL, State: gitlabState(mr.State), Created: true}, nil
}

// ClosePullRequest finds the open merge request of head (as
// EnsurePullRequest does) and closes it (PUT state_event=close).
func (f *gitlabForge) ClosePullRequest(ctx context.Context, head, base string) (PullRequest, bool, error) {
	with := gitlab.WithContext(ctx)
	open, resp, err := f.client.MergeRequests.ListProjectMergeRequests(f.project, &gitlab.ListProjectMergeRequestsOptions{
		State: gitlab.Ptr("opened"), SourceBranch: gitlab.Ptr(head), TargetBranch: gitlab.Ptr(base),
	}, with)
	if err != nil {
		return PullRequest{}, false, f.gitlabError("listing open merge requests", resp, err)
	}
	if len(open) == 0 {
		return PullRequest{}, false, nil
	}
	mr, resp, err := f.client.MergeRequests.UpdateMergeRequest(f.project, open[0].IID, &gitlab.UpdateMergeRequestOptions{StateEvent: gitlab.Ptr("close")}, with)
	if err != nil {
		return PullRequest{}, false, f.gitlabError(fmt.Sprintf("closing merge request !%d", open[0].IID), resp, err)
	}
	return PullRequest{Number: mr.IID, URL: mr.WebURL, State: gitlabState(mr.State)}, true, nil
}

// userIDs looks the reviewers' user names up: GitLab takes reviewers by ID.
func (f *gitlabForge) userIDs(ctx context.Context, usernames []string) ([]int64, error) {
	var ids []int64
	for _, name := range usernames {
		users, resp, err := f.client.Users.ListUsers(&gitlab.ListUsersOptions{Username: gitlab.Ptr(name)}, gitlab.WithContext(ctx))
		if err != nil {
			return nil, f.gitlabError("looking up reviewer "+name, resp, err)
		}
		if len(users) == 0 {
			return nil, &APIError{Op: "looking up reviewer " + name, StatusCode: http.StatusNotFound, Err: fmt.Errorf("no GitLab user %q", name)}
		}
		ids = append(ids, users[0].ID)
	}
	return ids, nil
}

// gitlabState maps GitLab's opened, closed, merged and locked.
func gitlabState(s string) State {
	switch s {
	case "merged":
		return StateMerged
	case "closed":
		return StateClosed
	default:
		return StateOpen
	}
}

// gitlabError makes an APIError of a client-go error.
func (f *gitlabForge) gitlabError(op string, resp *gitlab.Response, err error) error {
	var httpResp *http.Response
	if resp != nil {
		httpResp = resp.Response
	}
	return apiError(op, httpResp, err, f.clock.Now())
}
