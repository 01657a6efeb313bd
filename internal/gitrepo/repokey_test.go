package gitrepo_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

func TestRepoKey(t *testing.T) {
	for _, tc := range []struct {
		name, url, want string
	}{
		{"https", "https://git.example.com/platform/fleet", "https://git.example.com/platform/fleet"},
		{"https with .git", "https://git.example.com/platform/fleet.git", "https://git.example.com/platform/fleet"},
		{"trailing slash", "https://git.example.com/platform/fleet/", "https://git.example.com/platform/fleet"},
		{".git and a trailing slash", "https://git.example.com/platform/fleet.git/", "https://git.example.com/platform/fleet"},
		{"upper-case scheme and host", "HTTPS://Git.Example.COM/platform/fleet", "https://git.example.com/platform/fleet"},
		{"the path keeps its case", "https://git.example.com/Platform/Fleet.git", "https://git.example.com/Platform/Fleet"},
		{"user info", "https://uprev:secret@git.example.com/platform/fleet.git", "https://git.example.com/platform/fleet"},
		{"https default port", "https://git.example.com:443/platform/fleet", "https://git.example.com/platform/fleet"},
		{"http default port", "http://git.example.com:80/platform/fleet", "http://git.example.com/platform/fleet"},
		{"http without port", "http://git.example.com/platform/fleet", "http://git.example.com/platform/fleet"},
		{"another port", "http://10.0.0.1:3000/fleet.git", "http://10.0.0.1:3000/fleet"},
		{"https on port 80 is not the default", "https://git.example.com:80/fleet", "https://git.example.com:80/fleet"},
		{"query and fragment", "https://git.example.com/fleet.git?x=1#y", "https://git.example.com/fleet"},
		{"ssh", "ssh://git@git.example.com/platform/fleet.git", "ssh://git.example.com/platform/fleet"},
		{"ssh default port", "ssh://git@git.example.com:22/platform/fleet", "ssh://git.example.com/platform/fleet"},
		{"ssh another port", "ssh://git@git.example.com:2222/platform/fleet.git", "ssh://git.example.com:2222/platform/fleet"},
		{"scp-like", "git@git.example.com:platform/fleet.git", "ssh://git.example.com/platform/fleet"},
		{"scp-like, absolute path", "git@Git.Example.com:/platform/fleet", "ssh://git.example.com/platform/fleet"},
		{"scp-like without user", "git.example.com:platform/fleet", "ssh://git.example.com/platform/fleet"},
		{"git protocol default port", "git://git.example.com:9418/fleet.git", "git://git.example.com/fleet"},
		{"IPv6 host", "https://[::1]:443/fleet.git", "https://[::1]/fleet"},
		{"IPv6 host and port", "https://[::1]:8443/fleet", "https://[::1]:8443/fleet"},
		{"white space", "  https://git.example.com/fleet.git \n", "https://git.example.com/fleet"},
		{"a local path", "/srv/git/fleet.git/", "/srv/git/fleet"},
		{"a file URL", "file:///srv/git/fleet.git", "file:///srv/git/fleet"},
		{"a Windows path", `C:\git\fleet.git`, `C:\git\fleet`},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(gitrepo.RepoKey(tc.url)).To(Equal(tc.want))
		})
	}
}

func TestSpellingsOfOneURLShareAKeptClone(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", seedFiles)
	g.Expect(url).To(HaveSuffix("/fleet.git"))
	cache := newCache(t)
	// Each session fetches with its own spelling, so only spellings this
	// server answers are used here; TestRepoKey covers the others.
	for _, spelling := range []string{url, strings.TrimSuffix(url, ".git"), strings.ToUpper(url[:4]) + url[4:]} {
		s := open(t, cache, newRemote(t, spelling, nil), "main", "")
		g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]), spelling)
		s.Close()
	}
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: 2}))
}
