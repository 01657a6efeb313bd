package forge

import "testing"

// TestServesGitHost: a Git host's credential goes only to the forge API on
// that host (or GitHub's API for github.com), never to another host or
// port.
func TestServesGitHost(t *testing.T) {
	for _, tc := range []struct {
		provider Provider
		api, git string
		serves   bool
	}{
		{GitHub, "", "https://github.com/acme/fleet.git", true},
		{GitHub, "https://api.github.com/", "https://GitHub.com/acme/fleet", true},
		{GitHub, "", "git@github.com:acme/fleet.git", true},
		{GitHub, "https://ghe.example.com/api/v3/", "https://ghe.example.com/acme/fleet.git", true},
		{GitHub, "https://ghe.example.com:8443/api/v3/", "https://ghe.example.com/acme/fleet.git", false},
		{GitHub, "", "https://git.example.com/acme/fleet.git", false},
		{GitHub, "https://api.github.com.evil.example/", "https://github.com/acme/fleet.git", false},
		{GitHub, "https://evil.example/api/v3/", "https://github.com/acme/fleet.git", false},
		{GitLab, "", "https://gitlab.com/group/sub/fleet.git", true},
		{GitLab, "https://gitlab.example.com", "ssh://git@gitlab.example.com:2222/acme/fleet.git", true},
		{Gitea, "http://127.0.0.1:3000", "http://127.0.0.1:3000/acme/fleet.git", true},
		{Gitea, "http://127.0.0.1:3001", "http://127.0.0.1:3000/acme/fleet.git", false},
		{Gitea, "http://127.0.0.1:80/", "http://127.0.0.1/acme/fleet.git", true},
		{Gitea, "https://127.0.0.1/", "http://127.0.0.1/acme/fleet.git", false},
		{Gitea, "", "http://127.0.0.1:3000/acme/fleet.git", false},
		{Gitea, "::not a url", "http://127.0.0.1:3000/acme/fleet.git", false},
	} {
		if got := ServesGitHost(tc.provider, tc.api, tc.git); got != tc.serves {
			t.Errorf("ServesGitHost(%s, %q, %q) = %v, want %v", tc.provider, tc.api, tc.git, got, tc.serves)
		}
	}
}
