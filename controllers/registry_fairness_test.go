package controllers

import (
	"errors"
	"strconv"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

func TestQuietWaitsForNewObjectsOnly(t *testing.T) {
	g := NewWithT(t)
	var q quietWaits
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	repo := &imagev1.ImageRepository{ObjectMeta: metav1.ObjectMeta{UID: "a"}}

	var silent *silentRetryError
	err := q.busyError(repo, now, "scan", "registry a")
	g.Expect(errors.As(err, &silent)).To(BeTrue(), "a new object's first wait writes nothing")
	g.Expect(silent.retryAfter).To(Equal(busyRetry))
	err = q.busyError(repo, now.Add(quietFor-time.Second), "scan", "registry a")
	g.Expect(errors.As(err, &silent)).To(BeTrue(), "nor its waits within quietFor of the first")

	err = q.busyError(repo, now.Add(quietFor), "scan", "registry a")
	g.Expect(errors.As(err, &silent)).To(BeFalse(), "a wait that lasts is shown")
	var retry *transientError
	g.Expect(errors.As(err, &retry)).To(BeTrue())
	g.Expect(retry.reason).To(Equal(registryBusyReason))
	g.Expect(err.Error()).To(ContainSubstring("registry a"))

	old := &imagev1.ImageRepository{ObjectMeta: metav1.ObjectMeta{UID: "b"}}
	conditions.MarkTrue(old, meta.ReadyCondition, "Succeeded", "scanned")
	err = q.busyError(old, now, "scan", "registry a")
	g.Expect(errors.As(err, &silent)).To(BeFalse(), "an object with a Ready condition shows that it waits")
	g.Expect(q.since).To(BeEmpty(), "nothing is kept for objects that were shown")

	for i := range maxQuietWaits + 1 {
		obj := &imagev1.ImageRepository{ObjectMeta: metav1.ObjectMeta{UID: types.UID(strconv.Itoa(i))}}
		_ = q.busyError(obj, now, "scan", "registry a")
	}
	g.Expect(len(q.since)).To(BeNumerically("<=", maxQuietWaits), "bounded")
}
