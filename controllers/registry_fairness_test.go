package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestWorkerShares(t *testing.T) {
	g := NewWithT(t)
	s := newWorkerShares(4)
	r1, _, ok := s.tryAcquire("registry a", "namespace x")
	g.Expect(ok).To(BeTrue())
	_, _, ok = s.tryAcquire("registry a", "namespace y")
	g.Expect(ok).To(BeTrue())
	_, busy, ok := s.tryAcquire("registry a", "namespace z")
	g.Expect(ok).To(BeFalse())
	g.Expect(busy).To(Equal("registry a"))
	_, _, ok = s.tryAcquire("registry b", "namespace x")
	g.Expect(ok).To(BeTrue())
	_, busy, ok = s.tryAcquire("registry c", "namespace x")
	g.Expect(ok).To(BeFalse())
	g.Expect(busy).To(Equal("namespace x"))
	g.Expect(s.held).NotTo(HaveKey("registry c"), "nothing is taken when a key is busy")

	r1()
	r1()
	_, _, ok = s.tryAcquire("registry a", "namespace z")
	g.Expect(ok).To(BeTrue())
	g.Expect(newWorkerShares(1).limit).To(Equal(1))
}
