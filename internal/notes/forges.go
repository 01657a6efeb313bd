package notes

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/url"
	"strings"

	giteasdk "code.gitea.io/sdk/gitea"
	"github.com/google/go-github/v87/github"
	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// Kind is a forge whose releases API the notes are read from.
type Kind string

// The forges whose releases are read.
const (
	GitHub Kind = "github"
	GitLab Kind = "gitlab"
	Gitea  Kind = "gitea"
)

// GitLabAPI is gitlab.com's REST API, which serves the releases of
// sources on gitlab.com.
var GitLabAPI = API{Kind: GitLab, URL: "https://gitlab.com/api/v4"}

// forge reads one repository's releases, a page at a time, newest first,
// and a file of its default branch.
type forge interface {
	// releases returns page (from 1) of the releases, drafts left out,
	// and whether a next page follows.
	releases(ctx context.Context, page int) ([]Release, bool, error)
	// file returns the content of path on the default branch.
	file(ctx context.Context, path string) ([]byte, error)
}

// forgeOf returns the forge of api for the repository owner/repo, whose
// web address is source.
func (f *Fetcher) forgeOf(_ context.Context, api API, source, owner, repo string) (forge, error) {
	client := withCredentials(f.client, api)
	switch api.Kind {
	case GitHub, "":
		opts := []github.ClientOptionsFunc{github.WithHTTPClient(client)}
		if api.Token != "" {
			opts = append(opts, github.WithAuthToken(api.Token))
		}
		if strings.TrimSuffix(api.URL, "/") != "https://api.github.com" {
			opts = append(opts, github.WithEnterpriseURLs(api.URL, api.URL))
		}
		client, err := github.NewClient(opts...)
		if err != nil {
			return nil, fmt.Errorf("GitHub API %q: %w", api.URL, err)
		}
		return githubRepo{client: client, owner: owner, repo: repo}, nil
	case GitLab:
		client, err := gitlab.NewClient(api.Token, gitlab.WithBaseURL(api.URL), gitlab.WithHTTPClient(client), gitlab.WithoutRetries())
		if err != nil {
			return nil, fmt.Errorf("GitLab API %q: %w", api.URL, err)
		}
		u, _ := url.Parse(source)
		project := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
		return gitlabRepo{client: client, project: project, web: strings.TrimSuffix(source, "/")}, nil
	case Gitea:
		// No version probe: the client asks the server nothing until the
		// first listing.
		client, err := giteasdk.NewClient(api.URL, giteasdk.SetHTTPClient(client), giteasdk.SetToken(api.Token), giteasdk.SetGiteaVersion(""))
		if err != nil {
			return nil, fmt.Errorf("gitea API %q: %w", api.URL, err)
		}
		return giteaRepo{client: client, owner: owner, repo: repo}, nil
	}
	return nil, fmt.Errorf("%w: forge kind %q", ErrNoAPI, api.Kind)
}

// githubRepo is a repository on GitHub.
type githubRepo struct {
	client      *github.Client
	owner, repo string
}

func (g githubRepo) releases(ctx context.Context, page int) ([]Release, bool, error) {
	list, resp, err := g.client.Repositories.ListReleases(ctx, g.owner, g.repo, &github.ListOptions{Page: page, PerPage: perPage})
	if err != nil {
		return nil, false, err
	}
	out := make([]Release, 0, len(list))
	for _, r := range list {
		if !r.GetDraft() {
			out = append(out, Release{Tag: r.GetTagName(), Name: r.GetName(), URL: r.GetHTMLURL(), Body: r.GetBody()})
		}
	}
	return out, resp.NextPage != 0, nil
}

func (g githubRepo) file(ctx context.Context, path string) ([]byte, error) {
	rc, _, err := g.client.Repositories.DownloadContents(ctx, g.owner, g.repo, path, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }() // read-only: a failed close loses nothing
	// The transport bounds the answer (boundedTransport).
	return io.ReadAll(rc)
}

// gitlabRepo is a project on GitLab.
type gitlabRepo struct {
	client  *gitlab.Client
	project string
	web     string
}

func (g gitlabRepo) releases(ctx context.Context, page int) ([]Release, bool, error) {
	list, resp, err := g.client.Releases.ListReleases(g.project, &gitlab.ListReleasesOptions{ListOptions: gitlab.ListOptions{Page: int64(page), PerPage: perPage}}, gitlab.WithContext(ctx))
	if err != nil {
		return nil, false, err
	}
	out := make([]Release, 0, len(list))
	for _, r := range list {
		if r.UpcomingRelease {
			continue
		}
		out = append(out, Release{Tag: r.TagName, Name: r.Name, URL: g.web + "/-/releases/" + url.PathEscape(r.TagName), Body: r.Description})
	}
	return out, resp.NextPage != 0, nil
}

func (g gitlabRepo) file(ctx context.Context, path string) ([]byte, error) {
	data, _, err := g.client.RepositoryFiles.GetRawFile(g.project, path, &gitlab.GetRawFileOptions{}, gitlab.WithContext(ctx))
	return data, err
}

// giteaRepo is a repository on Gitea (or Forgejo).
type giteaRepo struct {
	client      *giteasdk.Client
	owner, repo string
}

func (g giteaRepo) releases(ctx context.Context, page int) ([]Release, bool, error) {
	g.client.SetContext(ctx)
	list, resp, err := g.client.ListReleases(g.owner, g.repo, giteasdk.ListReleasesOptions{ListOptions: giteasdk.ListOptions{Page: page, PageSize: perPage}})
	if err != nil {
		return nil, false, err
	}
	out := make([]Release, 0, len(list))
	for _, r := range list {
		if !r.IsDraft {
			out = append(out, Release{Tag: r.TagName, Name: r.Title, URL: r.HTMLURL, Body: r.Note})
		}
	}
	return out, resp != nil && resp.NextPage != 0, nil
}

func (g giteaRepo) file(ctx context.Context, path string) ([]byte, error) {
	g.client.SetContext(ctx)
	// The contents endpoint reads the default branch when no ref is given.
	c, _, err := g.client.GetContents(g.owner, g.repo, "", path)
	if err != nil {
		return nil, err
	}
	if c.Content == nil {
		return nil, fmt.Errorf("%s is not a file", path)
	}
	return base64.StdEncoding.DecodeString(*c.Content)
}
