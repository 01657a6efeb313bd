// Package forge opens and updates the pull request (merge request) of a
// push branch on a Git forge: GitHub, GitLab or Gitea. It knows nothing of
// Kubernetes: it takes the forge's API address, a token and what the pull
// request should say, and returns the pull request or a typed error.
//
// The rule every implementation keeps: there is at most one open pull
// request per head branch and base branch, found by listing the open ones;
// a pull request that was merged or closed is never reopened or edited,
// the next call opens a new one.
package forge

import (
	"k8s.io/utils/clock"

	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Provider names a forge's API.
type Provider string

// The forges supported.
const (
	GitHub Provider = "github"
	GitLab Provider = "gitlab"
	Gitea  Provider = "gitea"
)

// Default API addresses, for the providers that have one.
const (
	DefaultGitHubURL = "https://api.github.com/"
	DefaultGitLabURL = "https://gitlab.com"
)

// State is the state of a pull request as the forge reports it.
type State string

// States of a pull request.
const (
	StateOpen   State = "open"
	StateClosed State = "closed"
	StateMerged State = "merged"
)

// Forge opens or updates the pull request of a branch.
type Forge interface {
	// EnsurePullRequest makes the open pull request from spec.Head into
	// spec.Base say what spec says, opening one when none is open.
	EnsurePullRequest(ctx context.Context, spec PullRequestSpec) (PullRequest, error)
	// ClosePullRequest closes the open pull request from head into base,
	// without merging it, and returns it; found is false when none is
	// open. A merged or closed one is left as it is.
	ClosePullRequest(ctx context.Context, head, base string) (pr PullRequest, found bool, err error)
}

// PullRequestSpec is what a pull request should be.
type PullRequestSpec struct {
	// Head is the branch with the changes.
	Head string
	// Base is the branch the changes go into.
	Base string
	// Title is the pull request's title.
	Title string
	// Body is its description, in Markdown.
	Body string
	// Labels are added to the pull request; labels people added stay.
	Labels []string
	// Reviewers are user names asked for a review.
	Reviewers []string
}

// PullRequest is a pull request on a forge.
type PullRequest struct {
	// Number is the pull request's number (GitLab: the merge request's IID).
	Number int64
	// URL is its web page.
	URL string
	// State is its state after the call: open, unless the forge says otherwise.
	State State
	// Created says the call opened it.
	Created bool
}

// Config says which forge and repository to talk to, and as whom.
type Config struct {
	// Provider is the forge's kind.
	Provider Provider
	// URL is the API's address: GitHub's API root (default
	// https://api.github.com/), the GitLab instance (default
	// https://gitlab.com) or the Gitea server (required).
	URL string
	// Repository is the repository as owner/name (GitLab: the project's
	// full path, groups included).
	Repository string
	// Token authenticates the calls; it is sent only in a header.
	Token string
	// HTTPClient makes the calls; required. It is the outbound layer's
	// (outbound.Denylist.Client), so that the operator's deny list and a
	// deadline apply to every call to a forge a tenant names.
	HTTPClient *http.Client
	// Clock tells the time, for the waits a rate limit's reset asks for;
	// nil means the wall clock.
	Clock clock.PassiveClock
}

// ErrInvalidConfig is wrapped by the errors of a Config that cannot work.
var ErrInvalidConfig = errors.New("invalid forge configuration")

// New returns the Forge of cfg.
func New(cfg Config) (Forge, error) {
	owner, name, ok := strings.Cut(strings.Trim(cfg.Repository, "/"), "/")
	if !ok || owner == "" || name == "" {
		return nil, fmt.Errorf("%w: repository %q is not owner/name", ErrInvalidConfig, cfg.Repository)
	}
	if cfg.HTTPClient == nil {
		return nil, fmt.Errorf("%w: no HTTP client (forge calls go through the outbound layer)", ErrInvalidConfig)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	switch cfg.Provider {
	case GitHub:
		return newGitHub(cfg, owner, name)
	case GitLab:
		return newGitLab(cfg)
	case Gitea:
		if cfg.URL == "" {
			return nil, fmt.Errorf("%w: the Gitea provider needs the server's URL", ErrInvalidConfig)
		}
		return &giteaForge{cfg: cfg, owner: owner, name: name}, nil
	default:
		return nil, fmt.Errorf("%w: unknown provider %q (github, gitlab or gitea)", ErrInvalidConfig, cfg.Provider)
	}
}

// APIError is a call the forge answered with an error, or that did not
// reach it. Its message never holds the token.
type APIError struct {
	// Op says what was being done, such as "listing open pull requests".
	Op string
	// StatusCode is the HTTP status, 0 when there was no answer.
	StatusCode int
	// RateLimited says the forge refused the call for its rate limit.
	RateLimited bool
	// RetryAfter is how long the forge asks to wait, 0 when it did not say.
	RetryAfter time.Duration
	// Err is the client library's error.
	Err error
}

// Error says what failed and how.
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.StatusCode)
	}
	if e.RateLimited {
		b.WriteString(" (rate limited")
		if e.RetryAfter > 0 {
			fmt.Fprintf(&b, ", retry after %s", e.RetryAfter.Round(time.Second))
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the library's error.
func (e *APIError) Unwrap() error { return e.Err }

// retryAfter reads a Retry-After header in seconds, or an absolute reset
// time (GitLab's RateLimit-Reset, GitHub's X-RateLimit-Reset, both Unix
// seconds), relative to the forge's time: its Date header when it sends
// one, so that a manager whose clock differs from the forge's still waits
// as long as the forge asks; else now.
func retryAfter(h http.Header, now time.Time) time.Duration {
	now = forgeTime(h, now)
	if s := h.Get("Retry-After"); s != "" {
		if d, err := time.ParseDuration(s + "s"); err == nil && d > 0 {
			return d
		}
		if t, err := http.ParseTime(s); err == nil && t.After(now) {
			return t.Sub(now)
		}
	}
	for _, key := range []string{"RateLimit-Reset", "X-RateLimit-Reset"} {
		var unix int64
		if _, err := fmt.Sscan(h.Get(key), &unix); err == nil && unix > 0 {
			if t := time.Unix(unix, 0); t.After(now) {
				return t.Sub(now)
			}
		}
	}
	return 0
}

// forgeTime is the forge's time when it answered with h: its Date header,
// or now when it sent none.
func forgeTime(h http.Header, now time.Time) time.Time {
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		return date
	}
	return now
}

// apiError makes an APIError from a library error and the HTTP response it
// came with, if any, at now.
func apiError(op string, resp *http.Response, err error, now time.Time) error {
	e := &APIError{Op: op, Err: err}
	if resp != nil {
		e.StatusCode = resp.StatusCode
		e.RetryAfter = retryAfter(resp.Header, now)
		e.RateLimited = resp.StatusCode == http.StatusTooManyRequests ||
			(resp.StatusCode == http.StatusForbidden && resp.Header.Get("X-RateLimit-Remaining") == "0")
	}
	return e
}
