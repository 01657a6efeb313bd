package gitrepo_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// A run that asks not to wait (WakeWhenFree) for a kept clone in use gets
// ErrCloneBusy at once, is woken once when the clone is given back, and
// then opens it; of several such runs the first is woken, then the next.
func TestKeptCloneBusyWakesWhenFree(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	remote.Timeout = time.Hour // a wait in the caller would hang the test
	cache := newCache(t)
	holder, err := cache.Open(context.Background(), remote, gitrepo.OpenOptions{Branch: "main", Owner: "Sync/a/holder"})
	g.Expect(err).NotTo(HaveOccurred())

	woken := make(chan string, 10)
	wakeCtx := func(owner string) context.Context {
		return gitrepo.WakeWhenFree(context.Background(), func() { woken <- owner })
	}
	for _, owner := range []string{"Sync/a/first", "Sync/a/second", "Sync/a/first"} {
		_, err := cache.Open(wakeCtx(owner), remote, gitrepo.OpenOptions{Branch: "main", Owner: owner})
		g.Expect(err).To(MatchError(gitrepo.ErrCloneBusy), owner)
		g.Expect(err.Error()).To(ContainSubstring(remote.Redacted()))
	}
	_, _, err = cache.OpenRevision(wakeCtx("Sync/a/gone"), remote, gitrepo.Ref{Branch: "main"}, "Sync/a/gone")
	g.Expect(err).To(MatchError(gitrepo.ErrCloneBusy), "OpenRevision of a branch does not wait either")
	cache.Release("Sync/a/gone")
	g.Expect(woken).To(BeEmpty(), "no one is woken while the clone is in use")

	holder.Close()
	g.Expect(woken).To(Receive(Equal("Sync/a/second")), "the first in line, which came again, stands behind second")
	g.Expect(woken).To(BeEmpty(), "one run woken per release")
	second, err := cache.Open(wakeCtx("Sync/a/second"), remote, gitrepo.OpenOptions{Branch: "main", Owner: "Sync/a/second"})
	g.Expect(err).NotTo(HaveOccurred())
	second.Close()
	g.Expect(woken).To(Receive(Equal("Sync/a/first")))
	first, err := cache.Open(wakeCtx("Sync/a/first"), remote, gitrepo.OpenOptions{Branch: "main", Owner: "Sync/a/first"})
	g.Expect(err).NotTo(HaveOccurred())
	first.Close()
	g.Expect(woken).To(BeEmpty(), "a released owner is not woken")
	g.Expect(cache.Stats().Clones).To(Equal(int64(1)))
}
