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
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// shareTime is when the worker share and quiet wait tests start.
var shareTime = time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)

// teamObject names an object of the namespace team, for the worker share
// tests.
func teamObject(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "team", Name: name}
}

func TestWorkerShares(t *testing.T) {
	g := NewWithT(t)
	s := newWorkerShares(4)
	t0 := shareTime
	r1, _, ok := s.tryAcquire(t0, teamObject("a1"), "registry a", "namespace x")
	g.Expect(ok).To(BeTrue())
	_, _, ok = s.tryAcquire(t0.Add(time.Second), teamObject("a2"), "registry a", "namespace y")
	g.Expect(ok).To(BeTrue())
	_, busy, ok := s.tryAcquire(t0.Add(3*time.Second), teamObject("a3"), "registry a", "namespace z")
	g.Expect(ok).To(BeFalse())
	g.Expect(busy).To(Equal(busyShare{key: "registry a", heldFor: 3 * time.Second}), "held since its oldest holder took it")
	_, _, ok = s.tryAcquire(t0, teamObject("b1"), "registry b", "namespace x")
	g.Expect(ok).To(BeTrue())
	_, busy, ok = s.tryAcquire(t0, teamObject("c1"), "registry c", "namespace x")
	g.Expect(ok).To(BeFalse())
	g.Expect(busy.key).To(Equal("namespace x"))
	g.Expect(s.held).NotTo(HaveKey("registry c"), "nothing is taken when a key is busy")
	_, _, ok = s.tryAcquire(t0.Add(3*time.Second), teamObject("a4"), "registry a", "namespace z")
	g.Expect(ok).To(BeFalse())
	_, _, ok = s.tryAcquire(t0.Add(4*time.Second), teamObject("a3"), "registry a", "namespace z")
	g.Expect(ok).To(BeFalse())
	g.Expect(s.lines["registry a"]).To(Equal([]types.NamespacedName{teamObject("a3"), teamObject("a4")}), "in line once, in the order they came")

	r1()
	r1()
	g.Expect(woken(s)).To(Equal([]string{"team/a3", "team/c1"}), "a given-back share wakes the first in line of each of its keys, once")
	_, _, ok = s.tryAcquire(t0.Add(3*time.Second), teamObject("a4"), "registry a", "namespace z")
	g.Expect(ok).To(BeTrue())
	g.Expect(s.lines).NotTo(HaveKey("registry a"), "who takes a share leaves the line")
	_, busy, ok = s.tryAcquire(t0.Add(4*time.Second), teamObject("a3"), "registry a", "namespace z")
	g.Expect(ok).To(BeFalse())
	g.Expect(busy).To(Equal(busyShare{key: "registry a", heldFor: 3 * time.Second}), "the first holder gave its share back")
	g.Expect(newWorkerShares(1).limit).To(Equal(1))
}

func TestWorkerSharesWakeOneObjectPerKeyGivenBack(t *testing.T) {
	g := NewWithT(t)
	s := newWorkerShares(2)
	release, _, ok := s.tryAcquire(shareTime, teamObject("a1"), "registry a", "namespace x")
	g.Expect(ok).To(BeTrue())
	for _, name := range []string{"a2", "a3", "a4"} {
		_, _, ok := s.tryAcquire(shareTime, teamObject(name), "registry a", "namespace x")
		g.Expect(ok).To(BeFalse())
	}
	g.Expect(s.lines["namespace x"]).To(BeEmpty(), "the first used-up key is the one waited for")
	_, _, ok = s.tryAcquire(shareTime, teamObject("b1"), "registry b", "namespace x")
	g.Expect(ok).To(BeFalse())
	release()
	g.Expect(woken(s)).To(Equal([]string{"team/a2", "team/b1"}), "two shares given back wake two objects")
}

// woken returns the objects s woke so far, as namespace/name.
func woken(s *workerShares) []string {
	var names []string
	for {
		select {
		case e := <-s.woken:
			names = append(names, client.ObjectKeyFromObject(e.Object).String())
		default:
			return names
		}
	}
}

func TestQuietWaitsForNewObjectsOnly(t *testing.T) {
	g := NewWithT(t)
	var q quietWaits
	now := shareTime
	repo := &imagev1.ImageRepository{ObjectMeta: metav1.ObjectMeta{UID: "a"}}
	slow := busyShare{key: "registry a", heldFor: quietFor}

	var silent *silentRetryError
	err := q.busyError(repo, now, "scan", slow)
	g.Expect(errors.As(err, &silent)).To(BeTrue(), "a new object's first wait writes nothing")
	g.Expect(silent.retryAfter).To(Equal(busyRetry))
	err = q.busyError(repo, now.Add(quietFor-time.Second), "scan", slow)
	g.Expect(errors.As(err, &silent)).To(BeTrue(), "nor its waits within quietFor of the first")

	err = q.busyError(repo, now.Add(quietFor), "scan", slow)
	g.Expect(errors.As(err, &silent)).To(BeFalse(), "a wait that lasts is shown")
	var retry *transientError
	g.Expect(errors.As(err, &retry)).To(BeTrue())
	g.Expect(retry.reason).To(Equal(registryBusyReason))
	g.Expect(err.Error()).To(ContainSubstring("registry a"))

	old := &imagev1.ImageRepository{ObjectMeta: metav1.ObjectMeta{UID: "b"}}
	conditions.MarkTrue(old, meta.ReadyCondition, "Succeeded", "scanned")
	err = q.busyError(old, now, "scan", slow)
	g.Expect(errors.As(err, &silent)).To(BeFalse(), "an object with a Ready condition shows that it waits")
	g.Expect(q.since).To(BeEmpty(), "nothing is kept for objects that were shown")

	for i := range maxQuietWaits + 1 {
		obj := &imagev1.ImageRepository{ObjectMeta: metav1.ObjectMeta{UID: types.UID(strconv.Itoa(i))}}
		_ = q.busyError(obj, now, "scan", slow)
	}
	g.Expect(len(q.since)).To(BeNumerically("<=", maxQuietWaits), "bounded")
}

// TestQuietWaitsInLineForAShareThatTurnsOver: a new object waiting for a
// share whose holders each took it less than quietFor ago waits its turn
// silently however long; once a holder keeps it for quietFor, the wait is
// shown, counted from the object's first wait.
func TestQuietWaitsInLineForAShareThatTurnsOver(t *testing.T) {
	g := NewWithT(t)
	var q quietWaits
	now := shareTime
	repo := &imagev1.ImageRepository{ObjectMeta: metav1.ObjectMeta{UID: "a"}}
	turning := busyShare{key: "registry a", heldFor: 200 * time.Millisecond}

	var silent *silentRetryError
	for _, after := range []time.Duration{0, quietFor, 10 * quietFor} {
		err := q.busyError(repo, now.Add(after), "scan", turning)
		g.Expect(errors.As(err, &silent)).To(BeTrue(), "a wait in line, %s after the first, writes nothing", after)
		g.Expect(silent.retryAfter).To(Equal(quietFor), "its turn runs it again, or quietFor at the latest")
	}
	err := q.busyError(repo, now.Add(10*quietFor), "scan", busyShare{key: "registry a", heldFor: quietFor})
	g.Expect(errors.As(err, &silent)).To(BeFalse(), "a share held for quietFor shows the waits behind it")
	g.Expect(err.Error()).To(ContainSubstring("registry a already holds its share"))
}

// A manager started with empty storage runs a policy that was Ready
// before its first scan of the policy's repository: the policy waits for
// the tags without a word, whatever its status, and the wait is shown
// when the scan does not come.
func TestQuietWaitForTagsKeepsAReadyPolicysStatusForABoundedTime(t *testing.T) {
	g := NewWithT(t)
	var q quietWaits
	now := shareTime
	pol := &imagev1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{UID: "p"}}
	conditions.MarkTrue(pol, meta.ReadyCondition, "Succeeded", "Latest image tag for agent resolved to 1.1.0")
	notStored := transient(meta.DependencyNotReadyReason, errors.New("tags of ImageRepository fleet/agent are not stored yet"))

	var silent *silentRetryError
	err := q.waitForTags(pol, now, notStored)
	g.Expect(errors.As(err, &silent)).To(BeTrue(), "a Ready policy's first wait for the tags writes nothing")
	g.Expect(silent.retryAfter).To(Equal(busyRetry))
	g.Expect(q.waiting(pol.UID)).To(BeTrue(), "a rescan wakes it")
	err = q.waitForTags(pol, now.Add(quietFor-time.Second), notStored)
	g.Expect(errors.As(err, &silent)).To(BeTrue(), "nor its waits within quietFor of the first")

	err = q.waitForTags(pol, now.Add(quietFor), notStored)
	g.Expect(errors.As(err, &silent)).To(BeFalse(), "a scan that does not come is shown")
	var retry *transientError
	g.Expect(errors.As(err, &retry)).To(BeTrue())
	g.Expect(retry.reason).To(Equal(meta.DependencyNotReadyReason))
	g.Expect(q.waiting(pol.UID)).To(BeFalse())

	_ = q.waitForTags(pol, now.Add(2*quietFor), notStored)
	q.done(pol.UID)
	g.Expect(q.waiting(pol.UID)).To(BeFalse(), "the tags came: nothing is kept")
	err = q.waitForTags(pol, now.Add(3*quietFor), notStored)
	g.Expect(errors.As(err, &silent)).To(BeTrue(), "a later wait counts from its own start")
}
