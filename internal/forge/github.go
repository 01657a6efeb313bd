package forge

import (
	"k8s.io/utils/clock"

	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v87/github"
)

// githubForge opens pull requests through GitHub's REST API.
type githubForge struct {
	client      *github.Client
	owner, name string
	clock       clock.PassiveClock
}

func newGitHub(cfg Config, owner, name string) (*githubForge, error) {
	if strings.Contains(name, "/") {
		return nil, fmt.Errorf("%w: GitHub repository %q is not owner/name", ErrInvalidConfig, cfg.Repository)
	}
	opts := []github.ClientOptionsFunc{github.WithHTTPClient(cfg.HTTPClient), github.WithAuthToken(cfg.Token)}
	if cfg.URL != "" && strings.TrimSuffix(cfg.URL, "/") != strings.TrimSuffix(DefaultGitHubURL, "/") {
		opts = append(opts, github.WithEnterpriseURLs(cfg.URL, cfg.URL))
	}
	client, err := github.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: GitHub API URL %q: %w", ErrInvalidConfig, cfg.URL, err)
	}
	return &githubForge{client: client, owner: owner, name: name, clock: cfg.Clock}, nil
}

// EnsurePullRequest finds the open pull request of spec.Head (GET
// /repos/{owner}/{repo}/pulls?head=owner:branch&base=&state=open) and edits
// it, or opens one; then adds the labels and asks the reviewers.
func (f *githubForge) EnsurePullRequest(ctx context.Context, spec PullRequestSpec) (PullRequest, error) {
	open, resp, err := f.client.PullRequests.List(ctx, f.owner, f.name, &github.PullRequestListOptions{
		State: "open", Head: f.owner + ":" + spec.Head, Base: spec.Base,
	})
	if err != nil {
		return PullRequest{}, f.githubError("listing open pull requests", resp, err)
	}
	var pr *github.PullRequest
	created := false
	if len(open) > 0 {
		pr, resp, err = f.client.PullRequests.Edit(ctx, f.owner, f.name, open[0].GetNumber(), &github.PullRequest{
			Title: github.Ptr(spec.Title), Body: github.Ptr(spec.Body),
		})
		if err != nil {
			return PullRequest{}, f.githubError(fmt.Sprintf("updating pull request #%d", open[0].GetNumber()), resp, err)
		}
	} else {
		pr, resp, err = f.client.PullRequests.Create(ctx, f.owner, f.name, &github.NewPullRequest{
			Title: github.Ptr(spec.Title), Body: github.Ptr(spec.Body),
			Head: github.Ptr(spec.Head), Base: github.Ptr(spec.Base),
		})
		if err != nil {
			return PullRequest{}, f.githubError("opening a pull request", resp, err)
		}
		created = true
	}
	n := pr.GetNumber()
	if len(spec.Labels) > 0 {
		if _, resp, err := f.client.Issues.AddLabelsToIssue(ctx, f.owner, f.name, n, spec.Labels); err != nil {
			return PullRequest{}, f.githubError(fmt.Sprintf("labelling pull request #%d", n), resp, err)
		}
	}
	if len(spec.Reviewers) > 0 {
		if _, resp, err := f.client.PullRequests.RequestReviewers(ctx, f.owner, f.name, n, github.ReviewersRequest{Reviewers: spec.Reviewers}); err != nil {
			return PullRequest{}, f.githubError(fmt.Sprintf("requesting reviewers of pull request #%d", n), resp, err)
		}
	}
	return PullRequest{Number: int64(n), URL: pr.GetHTMLURL(), State: githubState(pr), Created: created}, nil
}

// ClosePullRequest finds the open pull request of head (as
// EnsurePullRequest does) and closes it (PATCH state=closed).
func (f *githubForge) ClosePullRequest(ctx context.Context, head, base string) (PullRequest, bool, error) {
	open, resp, err := f.client.PullRequests.List(ctx, f.owner, f.name, &github.PullRequestListOptions{
		State: "open", Head: f.owner + ":" + head, Base: base,
	})
	if err != nil {
		return PullRequest{}, false, f.githubError("listing open pull requests", resp, err)
	}
	if len(open) == 0 {
		return PullRequest{}, false, nil
	}
	n := open[0].GetNumber()
	pr, resp, err := f.client.PullRequests.Edit(ctx, f.owner, f.name, n, &github.PullRequest{State: github.Ptr("closed")})
	if err != nil {
		return PullRequest{}, false, f.githubError(fmt.Sprintf("closing pull request #%d", n), resp, err)
	}
	return PullRequest{Number: int64(n), URL: pr.GetHTMLURL(), State: githubState(pr)}, true, nil
}

// githubState is the state of pr: merged, closed or open.
func githubState(pr *github.PullRequest) State {
	switch {
	case pr.GetMerged():
		return StateMerged
	case pr.GetState() == "closed":
		return StateClosed
	default:
		return StateOpen
	}
}

// githubError makes an APIError of a go-github error, with the wait its
// rate limit errors carry.
func (f *githubForge) githubError(op string, resp *github.Response, err error) error {
	var httpResp *http.Response
	if resp != nil {
		httpResp = resp.Response
	}
	now := f.clock.Now()
	apiErr := apiError(op, httpResp, err, now).(*APIError)
	if httpResp != nil {
		now = forgeTime(httpResp.Header, now)
	}
	var rate *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	switch {
	case errors.As(err, &rate):
		apiErr.RateLimited = true
		if wait := rate.Rate.Reset.Sub(now); wait > 0 {
			apiErr.RetryAfter = wait
		}
	case errors.As(err, &abuse):
		apiErr.RateLimited = true
		if abuse.RetryAfter != nil {
			apiErr.RetryAfter = *abuse.RetryAfter
		}
	}
	return apiErr
}
