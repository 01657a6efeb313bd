package forge

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// githubGitHost is where GitHub serves Git; its API is DefaultGitHubURL.
const githubGitHost = "github.com"

// ServesGitHost reports whether the API of provider at apiURL (empty: the
// provider's default) runs on the host of the Git repository at gitURL,
// so that a credential of that Git host may authenticate it: the same
// host name (and, for a Git URL over HTTP(S), the same port), or GitHub's
// API for a repository on github.com. A URL that does not parse is
// another host.
func ServesGitHost(provider Provider, apiURL, gitURL string) bool {
	if apiURL == "" {
		switch provider {
		case GitHub:
			apiURL = DefaultGitHubURL
		case GitLab:
			apiURL = DefaultGitLabURL
		default:
			return false
		}
	}
	api, err := url.Parse(apiURL)
	if err != nil || api.Hostname() == "" {
		return false
	}
	git, err := transport.NewEndpoint(gitURL)
	if err != nil || git.Host == "" {
		return false
	}
	apiHost, gitHost := strings.ToLower(api.Hostname()), strings.ToLower(git.Host)
	if provider == GitHub && gitHost == githubGitHost && apiHost == "api."+githubGitHost {
		return true
	}
	if apiHost != gitHost {
		return false
	}
	if git.Protocol != "http" && git.Protocol != "https" {
		return true
	}
	return portOf(api.Scheme, api.Port()) == portOf(git.Protocol, gitPort(git.Port))
}

// portOf is port, or the default port of scheme when port is empty.
func portOf(scheme, port string) string {
	if port != "" {
		return port
	}
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// gitPort is a transport.Endpoint's port as a URL writes it, empty for
// none.
func gitPort(port int) string {
	if port == 0 {
		return ""
	}
	return strconv.Itoa(port)
}
