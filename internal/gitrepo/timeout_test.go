package gitrepo_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/tarpit"
)

// tarpitTimeout is the remote timeout of the tests against a tarpit.
const tarpitTimeout = 500 * time.Millisecond

// openWithin opens a session of remote and fails the test unless the open
// ends (in error) within bound; it returns the error.
func openWithin(t *testing.T, bound time.Duration, open func(context.Context) error) error {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- open(context.Background()) }()
	select {
	case err := <-done:
		t.Logf("the open ended after %s: %v", time.Since(start).Round(time.Millisecond), err)
		return err
	case <-time.After(bound):
		t.Fatalf("the open did not end within %s of a server that never answers", bound)
		return nil
	}
}

func TestCloneFromTarpitTimesOutNamingTheHost(t *testing.T) {
	for name, url := range map[string]func(tp *tarpit.Tarpit) string{
		"http":  func(tp *tarpit.Tarpit) string { return "http://" + tp.Addr() + "/fleet.git" },
		"https": func(tp *tarpit.Tarpit) string { return "https://user:s3cret@" + tp.Addr() + "/fleet.git" },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			tp := tarpit.Start(t)
			remote := newRemote(t, url(tp), nil)
			remote.Timeout = tarpitTimeout
			cache := newCache(t)

			err := openWithin(t, 10*tarpitTimeout, func(ctx context.Context) error {
				_, err := cache.Open(ctx, remote, gitrepo.OpenOptions{Branch: "main"})
				return err
			})
			g.Expect(err).To(MatchError(gitrepo.ErrTimeout))
			g.Expect(err.Error()).To(And(ContainSubstring(tp.Addr()), ContainSubstring("500ms")))
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
			g.Expect(tp.Accepted()).To(BeNumerically(">", 0), "the clone reached the tarpit")

			err = openWithin(t, 10*tarpitTimeout, func(ctx context.Context) error {
				_, _, err := cache.OpenRevision(ctx, remote, gitrepo.Ref{Tag: "v1.0.0"}, "")
				return err
			})
			g.Expect(err).To(MatchError(gitrepo.ErrTimeout))
		})
	}
}

func TestSSHCloneFromTarpitTimesOut(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	tp := tarpit.Start(t)
	remote := newRemote(t, "ssh://git@"+tp.Addr()+"/fleet.git", map[string][]byte{
		"identity":    srv.ClientKeyPEM(),
		"known_hosts": srv.KnownHosts(),
	})
	remote.Timeout = tarpitTimeout

	err := openWithin(t, 10*tarpitTimeout, func(ctx context.Context) error {
		_, err := newCache(t).Open(ctx, remote, gitrepo.OpenOptions{Branch: "main"})
		return err
	})
	g.Expect(err).To(MatchError(gitrepo.ErrTimeout))
	g.Expect(err.Error()).To(ContainSubstring(tp.Addr()))
}

func TestWaitForBusyCloneEndsAtTheTimeout(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	srv.InitRepo(t, "fleet", "main", seedFiles)
	remote := newRemote(t, srv.HTTPURL("fleet"), nil)
	cache := newCache(t)
	held := open(t, cache, remote, "main", "")
	defer held.Close()

	remote.Timeout = tarpitTimeout
	err := openWithin(t, 10*tarpitTimeout, func(ctx context.Context) error {
		_, err := cache.Open(ctx, remote, gitrepo.OpenOptions{Branch: "main"})
		return err
	})
	g.Expect(err).To(MatchError(gitrepo.ErrTimeout))
	g.Expect(err.Error()).To(ContainSubstring("waiting for the kept clone"))
}

func TestPushToServerThatNeverAnswersTimesOut(t *testing.T) {
	g := NewWithT(t)
	gate := make(chan struct{}) // never opened: pushes get no answer
	srv := gitserver.Start(t, gitserver.WithPushGate(gate))
	// The server waits for the held push before it stops.
	t.Cleanup(func() { close(gate) })
	srv.InitRepo(t, "fleet", "main", seedFiles)
	before := srv.Log(t, "fleet", "main")[0].SHA
	remote := newRemote(t, srv.HTTPURL("fleet"), nil)
	s := open(t, newCache(t), remote, "main", "")
	// Only the push is held: the clone before it may take longer on a
	// loaded machine.
	remote.Timeout = tarpitTimeout

	err := openWithin(t, 10*tarpitTimeout, func(ctx context.Context) error {
		_, err := s.WriteBack(ctx, author, writeFiles(map[string]string{"clusters/prod/agent.yaml": "image: ghcr.io/acme/agent:1.4.2\n"}))
		return err
	})
	g.Expect(err).To(MatchError(gitrepo.ErrTimeout))
	g.Expect(err.Error()).To(ContainSubstring("pushing to"))
	g.Expect(srv.Log(t, "fleet", "main")[0].SHA).To(Equal(before), "nothing was pushed")
}
