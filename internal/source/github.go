package source

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/uprev-dev/uprev/internal/forge"
)

// MaxReleasePages bounds the pages of releases one scan reads (100
// releases a page): the newest 1,000 releases are listed.
const MaxReleasePages = 10

// ListGitHubReleases lists the releases of repository (owner/name) through
// GitHub's REST API at apiURL (forge.DefaultGitHubURL when empty; GitHub
// Enterprise's https://<host>/api/v3 or Gitea's https://<host>/api/v1 are
// compatible). Drafts are never listed; prereleases are, marked, for Select
// to decide on. The version is the release's tag and its URL the release's
// page. Pages are followed by their Link header, on the API's host only, up
// to MaxReleasePages. key names the source, for conditional requests.
func (c *Client) ListGitHubReleases(ctx context.Context, key string, access Access, apiURL, repository string) (Listing, error) {
	ctx, cancel := access.withTimeout(ctx)
	defer cancel()
	if apiURL == "" {
		apiURL = forge.DefaultGitHubURL
	}
	owner, name, ok := strings.Cut(repository, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return Listing{}, fmt.Errorf("%w: repository %q is not owner/name", ErrInvalidConfig, repository)
	}
	s, err := c.session(key, apiURL, access)
	if err != nil {
		return Listing{}, err
	}
	// per_page is GitHub's page size, limit Gitea's.
	next := fmt.Sprintf("%s/repos/%s/%s/releases?per_page=100&limit=100", strings.TrimSuffix(apiURL, "/"), url.PathEscape(owner), url.PathEscape(name))
	headers := map[string]string{"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
	listing := Listing{NotModified: true}
	for page := 1; next != ""; page++ {
		if page > MaxReleasePages {
			break
		}
		a, notModified, err := s.get(ctx, next, "", headers, s.parseReleases)
		if err != nil {
			return Listing{}, err
		}
		listing.Versions = append(listing.Versions, a.value.([]Version)...)
		listing.NotModified = listing.NotModified && notModified
		next = a.next
	}
	return listing, nil
}

// release is the part of GitHub's release object uprev reads.
type release struct {
	TagName    string `json:"tag_name"`
	HTMLURL    string `json:"html_url"`
	Draft      bool   `json:"draft"`
	Prerelease bool   `json:"prerelease"`
}

// parseReleases reads one page of releases and the URL of the next page.
func (s *session) parseReleases(resp *http.Response, body []byte) (answer, error) {
	var releases []release
	if err := json.Unmarshal(body, &releases); err != nil {
		return answer{}, fmt.Errorf("%w: not a JSON list of releases (Content-Type %q): %w", ErrInvalidResponse, resp.Header.Get("Content-Type"), err)
	}
	versions := make([]Version, 0, len(releases))
	for _, r := range releases {
		if r.Draft || r.TagName == "" {
			continue
		}
		versions = append(versions, Version{Version: r.TagName, URL: r.HTMLURL, Prerelease: r.Prerelease})
	}
	next, err := s.nextPage(resp)
	return answer{value: versions, next: next}, err
}

// nextPage returns the rel="next" link of resp, which must be on the API's
// host; "" when there is none.
func (s *session) nextPage(resp *http.Response) (string, error) {
	for _, link := range strings.Split(resp.Header.Get("Link"), ",") {
		target, params, ok := strings.Cut(link, ";")
		if !ok || !strings.Contains(params, `rel="next"`) {
			continue
		}
		target = strings.Trim(strings.TrimSpace(target), "<>")
		u, err := resp.Request.URL.Parse(target)
		if err != nil {
			return "", fmt.Errorf("%w: the next page's link %q does not parse", ErrInvalidResponse, target)
		}
		if u.Host != s.host {
			return "", fmt.Errorf("%w: the next page's link goes to %s, not %s", ErrInvalidResponse, u.Host, s.host)
		}
		return u.String(), nil
	}
	return "", nil
}
