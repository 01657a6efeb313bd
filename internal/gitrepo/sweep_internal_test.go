package gitrepo

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestSweepKeepsACloneSomeoneWaitsFor covers a user that found the clone
// and waits for its lock when the sweep runs: it must find the clone where
// it was, not one removed behind its back.
func TestSweepKeepsACloneSomeoneWaitsFor(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote, err := NewRemote(srv.InitRepo(t, "fleet", "main", map[string]string{"a.yaml": "a: 1\n"}), nil)
	g.Expect(err).NotTo(HaveOccurred())
	clock := testingclock.NewFakeClock(time.Now())
	cache, err := NewCacheWithOptions(filepath.Join(t.TempDir(), "clones"), CacheOptions{Clock: clock})
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()

	first, err := cache.Open(ctx, remote, OpenOptions{Branch: "main"})
	g.Expect(err).NotTo(HaveOccurred())
	type opening struct {
		s   *Session
		err error
	}
	opened := make(chan opening)
	go func() {
		s, err := cache.Open(ctx, remote, OpenOptions{Branch: "main"})
		opened <- opening{s, err}
	}()
	g.Eventually(func() int {
		cache.mu.Lock()
		defer cache.mu.Unlock()
		return first.clone.users
	}).Should(Equal(2), "the second user waits for the first")
	first.Close()
	clock.Step(unusedGrace)
	g.Expect(cache.Sweep(clock.Now())).To(Succeed())

	var second opening
	g.Eventually(opened).Should(Receive(&second))
	g.Expect(second.err).NotTo(HaveOccurred())
	defer second.s.Close()
	g.Expect(second.s.Dir()).To(BeADirectory())
	g.Expect(cache.Stats()).To(Equal(CacheStats{Clones: 1, Fetches: 1}))
}
