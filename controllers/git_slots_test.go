package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// refused asks for a slot with a context already done, so that a run
// that would wait is put in the line and returns at once.
func refused(g Gomega, s *gitSlots, ns, id string) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.acquire(ctx, ns, id)
	g.Expect(err).To(MatchError(context.Canceled), "%s finds no slot", id)
}

func TestGitSlotsBoundANamespaceAndServeItsLineInOrder(t *testing.T) {
	g := NewWithT(t)
	s := newGitSlots(2)
	ctx := context.Background()
	releaseA, err := s.acquire(ctx, "tenant", "a")
	g.Expect(err).NotTo(HaveOccurred())
	releaseB, err := s.acquire(ctx, "tenant", "b")
	g.Expect(err).NotTo(HaveOccurred())

	// Other namespaces are not bounded by this one.
	releaseOther, err := s.acquire(ctx, "other", "x")
	g.Expect(err).NotTo(HaveOccurred())
	releaseOther()

	refused(g, s, "tenant", "c")
	refused(g, s, "tenant", "d")
	releaseA()
	releaseA()                   // once only
	refused(g, s, "tenant", "a") // c and d asked before a came back
	releaseC, err := s.acquire(ctx, "tenant", "c")
	g.Expect(err).NotTo(HaveOccurred(), "the first in line takes the freed slot")
	refused(g, s, "tenant", "e")

	releaseB()
	releaseD, err := s.acquire(ctx, "tenant", "d")
	g.Expect(err).NotTo(HaveOccurred())
	releaseC()
	releaseD()
	for _, id := range []string{"a", "e"} {
		release, err := s.acquire(ctx, "tenant", id)
		g.Expect(err).NotTo(HaveOccurred())
		defer release()
	}
}

func TestGitSlotsWaitBriefly(t *testing.T) {
	g := NewWithT(t)
	s := newGitSlots(1)
	release, err := s.acquire(context.Background(), "tenant", "a")
	g.Expect(err).NotTo(HaveOccurred())

	// A slot freed during the wait is taken.
	done := make(chan error, 1)
	go func() {
		r, err := s.acquire(context.Background(), "tenant", "b")
		if err == nil {
			r()
		}
		done <- err
	}()
	g.Eventually(func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.namespaces["tenant"].line)
	}).Should(Equal(1), "b waits in line")
	release()
	g.Eventually(done).Should(Receive(BeNil()))

	// A slot that stays taken gives the worker back after gitSlotWait.
	release, err = s.acquire(context.Background(), "tenant", "a")
	g.Expect(err).NotTo(HaveOccurred())
	defer release()
	start := time.Now()
	_, err = s.acquire(context.Background(), "tenant", "c")
	var wait *waitingError
	g.Expect(errors.As(err, &wait)).To(BeTrue())
	g.Expect(wait.retryAfter).To(Equal(gitSlotRetry))
	g.Expect(time.Since(start)).To(BeNumerically("<", gitSlotWait+time.Second))
	g.Expect(err.Error()).To(ContainSubstring("namespace tenant"))
}
