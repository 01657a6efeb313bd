package forge

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"code.gitea.io/sdk/gitea"
)

// giteaForge opens pull requests through Gitea's REST API (/api/v1).
type giteaForge struct {
	cfg         Config
	owner, name string
}

// labelColor is the colour of the labels uprev creates on Gitea, which,
// unlike GitHub and GitLab, does not create a label a pull request names.
const labelColor = "#6f42c1"

// EnsurePullRequest lists the open pull requests (GET
// /repos/{owner}/{repo}/pulls?state=open), edits the one from spec.Head
// into spec.Base or opens one, then labels it and asks the reviewers.
func (f *giteaForge) EnsurePullRequest(ctx context.Context, spec PullRequestSpec) (PullRequest, error) {
	client, err := f.client(ctx)
	if err != nil {
		return PullRequest{}, err
	}
	labels, err := f.labelIDs(client, spec.Labels)
	if err != nil {
		return PullRequest{}, err
	}
	existing, err := f.openPullRequest(client, spec)
	if err != nil {
		return PullRequest{}, err
	}
	var pr *gitea.PullRequest
	var resp *gitea.Response
	created := existing == nil
	if existing != nil {
		pr, resp, err = client.EditPullRequest(f.owner, f.name, existing.Index, gitea.EditPullRequestOption{
			Title: spec.Title, Body: &spec.Body, Labels: mergeLabels(existing, labels),
		})
		if err != nil {
			return PullRequest{}, f.giteaError(fmt.Sprintf("updating pull request #%d", existing.Index), resp, err)
		}
	} else {
		pr, resp, err = client.CreatePullRequest(f.owner, f.name, gitea.CreatePullRequestOption{
			Head: spec.Head, Base: spec.Base, Title: spec.Title, Body: spec.Body, Labels: labels,
		})
		if err != nil {
			return PullRequest{}, f.giteaError("opening a pull request", resp, err)
		}
	}
	if len(spec.Reviewers) > 0 {
		resp, err := client.CreateReviewRequests(f.owner, f.name, pr.Index, gitea.PullReviewRequestOptions{Reviewers: spec.Reviewers})
		if err != nil {
			return PullRequest{}, f.giteaError(fmt.Sprintf("requesting reviewers of pull request #%d", pr.Index), resp, err)
		}
	}
	return PullRequest{Number: pr.Index, URL: pr.HTMLURL, State: giteaState(pr), Created: created}, nil
}

// ClosePullRequest finds the open pull request of head (as
// EnsurePullRequest does) and closes it (PATCH state=closed).
func (f *giteaForge) ClosePullRequest(ctx context.Context, head, base string) (PullRequest, bool, error) {
	client, err := f.client(ctx)
	if err != nil {
		return PullRequest{}, false, err
	}
	existing, err := f.openPullRequest(client, PullRequestSpec{Head: head, Base: base})
	if err != nil || existing == nil {
		return PullRequest{}, false, err
	}
	closed := gitea.StateClosed
	pr, resp, err := client.EditPullRequest(f.owner, f.name, existing.Index, gitea.EditPullRequestOption{State: &closed})
	if err != nil {
		return PullRequest{}, false, f.giteaError(fmt.Sprintf("closing pull request #%d", existing.Index), resp, err)
	}
	return PullRequest{Number: pr.Index, URL: pr.HTMLURL, State: giteaState(pr)}, true, nil
}

// client returns an SDK client of the server for ctx's calls. The
// server's version is not asked for: every call used here is in Gitea
// since 1.14, and a refused token is then reported by the first real
// call, with its status.
func (f *giteaForge) client(ctx context.Context) (*gitea.Client, error) {
	client, err := gitea.NewClient(f.cfg.URL, gitea.SetToken(f.cfg.Token), gitea.SetHTTPClient(f.cfg.HTTPClient),
		gitea.SetContext(ctx), gitea.SetGiteaVersion(""))
	if err != nil {
		return nil, fmt.Errorf("%w: Gitea URL %q: %w", ErrInvalidConfig, f.cfg.URL, err)
	}
	return client, nil
}

// openPullRequest returns the open pull request from spec.Head into
// spec.Base, nil when there is none. Gitea's list has no head filter, so
// every page of open pull requests is read.
func (f *giteaForge) openPullRequest(client *gitea.Client, spec PullRequestSpec) (*gitea.PullRequest, error) {
	for page := 1; ; page++ {
		prs, resp, err := client.ListRepoPullRequests(f.owner, f.name, gitea.ListPullRequestsOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: 50}, State: gitea.StateOpen,
		})
		if err != nil {
			return nil, f.giteaError("listing open pull requests", resp, err)
		}
		for _, pr := range prs {
			if pr.State == gitea.StateOpen && pr.Head != nil && pr.Base != nil && pr.Head.Ref == spec.Head && pr.Base.Ref == spec.Base {
				return pr, nil
			}
		}
		if len(prs) < 50 {
			return nil, nil
		}
	}
}

// labelIDs returns the IDs of the repository's labels of these names,
// creating the ones that do not exist.
func (f *giteaForge) labelIDs(client *gitea.Client, names []string) ([]int64, error) {
	if len(names) == 0 {
		return nil, nil
	}
	byName := map[string]int64{}
	for page := 1; ; page++ {
		labels, resp, err := client.ListRepoLabels(f.owner, f.name, gitea.ListLabelsOptions{ListOptions: gitea.ListOptions{Page: page, PageSize: 50}})
		if err != nil {
			return nil, f.giteaError("listing labels", resp, err)
		}
		for _, l := range labels {
			byName[l.Name] = l.ID
		}
		if len(labels) < 50 {
			break
		}
	}
	ids := make([]int64, 0, len(names))
	for _, name := range names {
		id, ok := byName[name]
		if !ok {
			l, resp, err := client.CreateLabel(f.owner, f.name, gitea.CreateLabelOption{Name: name, Color: labelColor})
			if err != nil {
				return nil, f.giteaError("creating label "+name, resp, err)
			}
			id = l.ID
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// mergeLabels keeps the labels pr has and adds ids: an edit replaces them.
func mergeLabels(pr *gitea.PullRequest, ids []int64) []int64 {
	if len(ids) == 0 {
		return nil
	}
	all := make([]int64, 0, len(pr.Labels)+len(ids))
	for _, l := range pr.Labels {
		all = append(all, l.ID)
	}
	for _, id := range ids {
		if !slices.Contains(all, id) {
			all = append(all, id)
		}
	}
	return all
}

// giteaState is the state of pr: merged, closed or open.
func giteaState(pr *gitea.PullRequest) State {
	switch {
	case pr.HasMerged:
		return StateMerged
	case pr.State == gitea.StateClosed:
		return StateClosed
	default:
		return StateOpen
	}
}

// giteaError makes an APIError of an SDK error.
func (f *giteaForge) giteaError(op string, resp *gitea.Response, err error) error {
	var httpResp *http.Response
	if resp != nil {
		httpResp = resp.Response
	}
	return apiError(op, httpResp, err, f.cfg.Clock.Now())
}
