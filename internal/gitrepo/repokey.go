package gitrepo

import (
	"net"
	"net/url"
	"strings"
)

// defaultPorts are the ports a URL of each scheme names when it names none.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ssh": "22", "git": "9418"}

// RepoKey returns the identity of the repository at rawURL: one string for
// every spelling of the same URL, which the clone cache, the Syncs told of a
// push and the webhook receivers all compare. The scheme and the host are
// lower-cased; user info, a default port (80 for http, 443 for https, 22
// for ssh, 9418 for git), the query and the fragment are dropped; so are
// trailing slashes and a trailing `.git`. The scp-like form
// `[user@]host:path` is ssh://host/path. The path keeps its case, because
// Git servers differ on whether it matters, and the scheme stays, because
// one transport's credentials do not work on another: an HTTPS and an SSH
// URL of one repository are two keys. A string that is no URL is its own
// key, without white space around it and trailing slashes and `.git`.
func RepoKey(rawURL string) string {
	s := strings.TrimSpace(rawURL)
	var scheme, host, port, path string
	switch {
	case strings.Contains(s, "://"):
		u, err := url.Parse(s)
		if err != nil {
			return trimRepoPath(s)
		}
		scheme, host, port, path = strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port(), u.Path
	case isSCPLike(s):
		userHost, p, _ := strings.Cut(s, ":")
		scheme, host, path = "ssh", strings.ToLower(userHost[strings.LastIndex(userHost, "@")+1:]), "/"+strings.TrimPrefix(p, "/")
	default:
		return trimRepoPath(s)
	}
	if port == defaultPorts[scheme] {
		port = ""
	}
	switch {
	case port != "":
		host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		host = "[" + host + "]" // IPv6
	}
	return scheme + "://" + host + trimRepoPath(path)
}

// isSCPLike reports whether s has git's scp-like form, [user@]host:path:
// a colon before any slash, after a host name longer than one letter (a
// Windows drive letter is a local path).
func isSCPLike(s string) bool {
	before, _, found := strings.Cut(s, ":")
	return found && !strings.Contains(before, "/") && len(before[strings.LastIndex(before, "@")+1:]) > 1
}

// trimRepoPath drops trailing slashes and a trailing `.git`.
func trimRepoPath(p string) string {
	return strings.TrimRight(strings.TrimSuffix(strings.TrimRight(p, "/"), ".git"), "/")
}
