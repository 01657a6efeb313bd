package gitrepo_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

func TestHTTPBasicAuthCloneAndFetch(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t, gitserver.WithBasicAuth("alice", "s3cret"))
	url := srv.InitRepo(t, "fleet", "main", seedFiles)
	cache := newCache(t)
	remote := newRemote(t, url, map[string][]byte{"username": []byte("alice"), "password": []byte("s3cret")})

	s := open(t, cache, remote, "main", "")
	g.Expect(readFile(g, s.Dir(), "clusters/prod/agent.yaml")).To(Equal(seedFiles["clusters/prod/agent.yaml"]))
	g.Expect(s.Head()).To(Equal(srv.Log(t, "fleet", "main")[0].SHA))
	s.Close()

	next := srv.CommitFile(t, "fleet", "main", "clusters/prod/agent.yaml", "image: ghcr.io/acme/agent:1.5.0\n", "Bump agent")
	s = open(t, cache, remote, "main", "")
	g.Expect(s.Head()).To(Equal(next))
	g.Expect(readFile(g, s.Dir(), "clusters/prod/agent.yaml")).To(Equal("image: ghcr.io/acme/agent:1.5.0\n"))
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: 1}))
}

func TestHTTPBearerTokenCloneAndPush(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t, gitserver.WithBearerToken("t0ken"))
	url := srv.InitRepo(t, "fleet", "main", seedFiles)
	remote := newRemote(t, url, map[string][]byte{"bearerToken": []byte("t0ken")})

	sha := writeBack(t, newCache(t), remote, "main", "", map[string]string{"clusters/prod/agent.yaml": "image: ghcr.io/acme/agent:1.4.2\n"})
	g.Expect(srv.Log(t, "fleet", "main")[0].SHA).To(Equal(sha))
}

func TestHTTPSWithOwnCA(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t, gitserver.WithTLS(), gitserver.WithBasicAuth("alice", "s3cret"))
	url := srv.InitRepo(t, "fleet", "main", seedFiles)
	creds := map[string][]byte{"username": []byte("alice"), "password": []byte("s3cret")}

	_, err := newCache(t).Open(context.Background(), newRemote(t, url, creds), gitrepo.OpenOptions{Branch: "main"})
	g.Expect(err).To(MatchError(ContainSubstring("certificate")))

	creds["ca.crt"] = srv.CACertPEM()
	s := open(t, newCache(t), newRemote(t, url, creds), "main", "")
	g.Expect(s.Head()).To(Equal(srv.Log(t, "fleet", "main")[0].SHA))
}

func TestWrongCredentials(t *testing.T) {
	const password, wrong = "s3cret", "hunter2-wrong"
	srv := gitserver.Start(t, gitserver.WithBasicAuth("alice", password))
	url := srv.InitRepo(t, "fleet", "main", seedFiles)
	cache := newCache(t)
	good := newRemote(t, url, map[string][]byte{"username": []byte("alice"), "password": []byte(password)})
	open(t, cache, good, "main", "").Close()

	for name, data := range map[string]map[string][]byte{
		"wrong password": {"username": []byte("alice"), "password": []byte(wrong)},
		"wrong token":    {"bearerToken": []byte(wrong)},
		"none":           nil,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			// The kept clone exists: the fetch must fail all the same.
			_, err := cache.Open(context.Background(), newRemote(t, url, data), gitrepo.OpenOptions{Branch: "main"})
			g.Expect(err).To(MatchError(gitrepo.ErrAuthentication))
			g.Expect(err.Error()).NotTo(ContainSubstring(wrong))
			g.Expect(err.Error()).NotTo(ContainSubstring(password))

			_, err = newCache(t).Open(context.Background(), newRemote(t, url, data), gitrepo.OpenOptions{Branch: "main"})
			g.Expect(err).To(MatchError(gitrepo.ErrAuthentication))
			g.Expect(err.Error()).NotTo(ContainSubstring(wrong))
		})
	}
	g := NewWithT(t)
	g.Expect(srv.Log(t, "fleet", "main")).To(HaveLen(1))
	g.Expect(srv.Counts().ReceivePack).To(BeZero())
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1}))
}

func TestRefNotFound(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", seedFiles)
	cache := newCache(t)
	remote := newRemote(t, url, nil)

	_, err := cache.Open(context.Background(), remote, gitrepo.OpenOptions{Branch: "nope"})
	g.Expect(err).To(MatchError(gitrepo.ErrRefNotFound))

	// A branch deleted after the clone was kept.
	srv.CommitFile(t, "fleet", "gone", "a.yaml", "a: 1\n", "Start gone")
	open(t, cache, remote, "gone", "").Close()
	srv.Git(t, "fleet", "branch", "-D", "gone")
	_, err = cache.Open(context.Background(), remote, gitrepo.OpenOptions{Branch: "gone"})
	g.Expect(err).To(MatchError(gitrepo.ErrRefNotFound))
}

func TestSSHKeyAndKnownHosts(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	srv.InitRepo(t, "fleet", "main", seedFiles)
	remote := newRemote(t, srv.SSHURL("fleet"), map[string][]byte{
		"identity":    srv.ClientKeyPEM(),
		"known_hosts": srv.KnownHosts(),
	})

	cache := newCache(t)
	sha := writeBack(t, cache, remote, "main", "", map[string]string{"clusters/prod/agent.yaml": "image: ghcr.io/acme/agent:1.4.2\n"})
	g.Expect(srv.Log(t, "fleet", "main")[0].SHA).To(Equal(sha))
	g.Expect(srv.ReadFile(t, "fleet", "main", "clusters/prod/agent.yaml")).To(Equal("image: ghcr.io/acme/agent:1.4.2\n"))

	s := open(t, cache, remote, "main", "")
	g.Expect(s.Head()).To(Equal(sha))
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: 1}))
}

func TestSSHUnknownHostKeyRefused(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	other := gitserver.Start(t)
	srv.InitRepo(t, "fleet", "main", seedFiles)

	remote := newRemote(t, srv.SSHURL("fleet"), map[string][]byte{
		"identity":    srv.ClientKeyPEM(),
		"known_hosts": other.KnownHosts(),
	})
	_, err := newCache(t).Open(context.Background(), remote, gitrepo.OpenOptions{Branch: "main"})
	g.Expect(err).To(MatchError(gitrepo.ErrUnknownHostKey))
	g.Expect(srv.Counts().UploadPack).To(BeZero())
}

func TestSSHWrongKey(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	other := gitserver.Start(t)
	srv.InitRepo(t, "fleet", "main", seedFiles)

	remote := newRemote(t, srv.SSHURL("fleet"), map[string][]byte{
		"identity":    other.ClientKeyPEM(),
		"known_hosts": srv.KnownHosts(),
	})
	_, err := newCache(t).Open(context.Background(), remote, gitrepo.OpenOptions{Branch: "main"})
	g.Expect(err).To(MatchError(gitrepo.ErrAuthentication))
}

func TestInvalidSecrets(t *testing.T) {
	srv := gitserver.Start(t)
	for name, tc := range map[string]struct {
		url  string
		data map[string][]byte
	}{
		"ssh without known_hosts": {srv.SSHURL("fleet"), map[string][]byte{"identity": srv.ClientKeyPEM()}},
		"ssh without identity":    {srv.SSHURL("fleet"), map[string][]byte{"known_hosts": srv.KnownHosts()}},
		"ssh with a bad key":      {srv.SSHURL("fleet"), map[string][]byte{"identity": []byte("not a key"), "known_hosts": srv.KnownHosts()}},
		"token and password":      {srv.HTTPURL("fleet"), map[string][]byte{"bearerToken": []byte("t"), "username": []byte("u"), "password": []byte("p")}},
		"password without user":   {srv.HTTPURL("fleet"), map[string][]byte{"password": []byte("p")}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := gitrepo.NewRemote(tc.url, tc.data)
			NewWithT(t).Expect(err).To(MatchError(gitrepo.ErrInvalidSecret))
		})
	}
	_, err := gitrepo.NewRemote("git://example.com/fleet.git", nil)
	NewWithT(t).Expect(err).To(MatchError(gitrepo.ErrInvalidURL))
}
