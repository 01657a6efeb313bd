package controllers

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// registryBusyReason: a repository that has not been scanned yet waits
// because its registry or its namespace already holds its share of the
// scan workers.
const registryBusyReason = "RegistryBusy"

// busyRetry is how soon a scan that found no free share is tried again.
const busyRetry = 5 * time.Second

// quietFor is how long a new object waits without saying so, for a share
// of the workers held by a slow call or for its ImageRepository to be
// created: writing such short waits, and the event of their Ready change,
// for every new object would double what creating an ImageRepository and
// its ImagePolicy costs the API server. An object whose wait lasts longer,
// or one that already has a Ready condition, shows it.
const quietFor = 10 * time.Second

// maxQuietWaits bounds the new objects quietWaits remembers.
const maxQuietWaits = 4096

// quietWaits remembers when the controller first put off each new object
// (one without a Ready condition), so that its short waits write nothing,
// and each policy waiting for this manager to store its repository's tags
// (waitForTags). It counts from the first wait, not from the object's
// creation: a manager that starts, or falls behind, with many new objects
// still reports none of their short waits. The zero value is ready to use.
type quietWaits struct {
	mu    sync.Mutex
	since map[types.UID]time.Time
}

// wait returns err, a short wait of obj's run, as a silent retry after
// busyRetry while obj has no Ready condition and its first wait is less
// than quietFor ago, and as it is otherwise.
func (q *quietWaits) wait(obj conditions.Getter, now time.Time, err error) error {
	return q.waitQuietly(obj, now, err, false)
}

// waitQuietly is wait, and when inLine, a silent retry after quietFor for a
// new object however long it has waited: its turn in line runs it sooner.
func (q *quietWaits) waitQuietly(obj conditions.Getter, now time.Time, err error, inLine bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	first, ok := q.firstWait(obj, now)
	switch {
	case !ok:
		return err
	case inLine:
		return &silentRetryError{err: err, retryAfter: quietFor}
	case now.Sub(first) >= quietFor:
		delete(q.since, obj.GetUID())
		return err
	}
	return &silentRetryError{err: err, retryAfter: busyRetry}
}

// waitForTags returns err, the error of obj's run that found its
// repository scanned but its tags not stored by this manager, as a silent
// retry after busyRetry while obj's first such wait is less than quietFor
// ago, whatever obj's status, and as it is otherwise. That is a manager
// started with empty storage, before its first scan of the repository:
// the scan is due at once, stores the tags and runs obj again (a rescan
// wakes the objects that wait here: waiting), and until then obj keeps the
// status it had rather than flapping to DependencyNotReady. A scan that
// does not come within quietFor (a registry that fails or does not
// answer) is shown.
func (q *quietWaits) waitForTags(obj conditions.Getter, now time.Time, err error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	first, ok := q.firstWaitOf(obj.GetUID(), now)
	if !ok || now.Sub(first) >= quietFor {
		delete(q.since, obj.GetUID())
		return err
	}
	return &silentRetryError{err: err, retryAfter: busyRetry}
}

// waiting reports whether the object uid waits quietly now.
func (q *quietWaits) waiting(uid types.UID) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.since[uid]
	return ok
}

// done forgets the wait of the object uid: what it waited for came.
func (q *quietWaits) done(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.since, uid)
}

// firstWait returns when new obj first waited, recording now if it had
// not; false when obj is not new (it has a Ready condition) or cannot be
// remembered. Callers hold q.mu.
func (q *quietWaits) firstWait(obj conditions.Getter, now time.Time) (time.Time, bool) {
	if conditions.Get(obj, meta.ReadyCondition) != nil {
		delete(q.since, obj.GetUID())
		return time.Time{}, false
	}
	return q.firstWaitOf(obj.GetUID(), now)
}

// firstWaitOf returns when the object uid first waited, recording now if
// it had not; false when it cannot be remembered. Callers hold q.mu.
func (q *quietWaits) firstWaitOf(uid types.UID, now time.Time) (time.Time, bool) {
	if q.since == nil {
		q.since = map[types.UID]time.Time{}
	}
	if first, ok := q.since[uid]; ok {
		return first, true
	}
	if len(q.since) >= maxQuietWaits {
		q.forgetBefore(now.Add(-quietFor))
	}
	if len(q.since) >= maxQuietWaits {
		return time.Time{}, false
	}
	q.since[uid] = now
	return now, true
}

// forgetBefore drops the objects first put off before t: their next wait
// is reported anyway.
func (q *quietWaits) forgetBefore(t time.Time) {
	for uid, first := range q.since {
		if first.Before(t) {
			delete(q.since, uid)
		}
	}
}

// busyError is the error of obj's run put off because a share of the
// workers is used up: RegistryBusy. A new object waits silently while the
// share turns over (none of its holders has held it for quietFor): it
// waits its turn in line, as objects do in the work queue, however long
// the line, and is run again when its turn comes (workerShares.tryAcquire)
// or, at the latest, after quietFor. Once a holder has held the share for
// quietFor, a registry that answers slowly holds the turns, and a new
// object's wait is shown after its own quietFor (see quietWaits), retried
// after busyRetry.
func (q *quietWaits) busyError(obj conditions.Getter, now time.Time, what string, busy busyShare) error {
	err := fmt.Errorf("waiting to %s: %s already holds its share of the workers", what, busy.key)
	return q.waitQuietly(obj, now, putOffAfter(registryBusyReason, err, busyRetry), busy.heldFor < quietFor)
}

// maxProbation bounds the keys on probation that workerShares remembers.
const maxProbation = 4096

// wokenBuffer is how many objects whose turn came workerShares holds for
// the controller's queue; past it, they come back at their retry.
const wokenBuffer = 1024

// workerShares bounds how many of a controller's workers one key may hold
// at once: a registry (its host, and the proxy requests go through) and a
// namespace each get at most limit. A registry that accepts connections
// and never answers then holds at most limit workers until the deadline of
// its calls, and the others serve every other registry and namespace. A
// caller that finds no share free does not wait for one: it stands in the
// key's line and its worker moves on; when a share of the key is given
// back, the first object of the line is run again (Woken).
type workerShares struct {
	limit int
	mu    sync.Mutex
	// held is, by key, when each of its holders took its share.
	held map[string][]time.Time
	// lines are, by key, the objects that found its shares used up, in
	// the order they came.
	lines map[string][]types.NamespacedName
	// woken carries the objects whose turn came to the controller.
	woken chan event.GenericEvent
	// onProbation are the keys whose last call timed out, with its error:
	// one run at a time tries them until one answers (settle).
	onProbation map[string]error
}

// busyShare is a share found used up: its key, and how long the oldest of
// its holders has held it; timedOut is the error of the key's last call
// when it timed out (the key is on probation).
type busyShare struct {
	key      string
	heldFor  time.Duration
	timedOut error
}

// newWorkerShares returns shares of workers for a controller with that
// many workers: half of them each, and at least one.
func newWorkerShares(workers int) *workerShares {
	return &workerShares{
		limit:       max(1, workers/2),
		held:        map[string][]time.Time{},
		lines:       map[string][]types.NamespacedName{},
		woken:       make(chan event.GenericEvent, wokenBuffer),
		onProbation: map[string]error{},
	}
}

// Woken is the source of the objects whose turn came, for the controller
// to run again.
func (s *workerShares) Woken() source.Source {
	return source.Channel(s.woken, &handler.EnqueueRequestForObject{})
}

// tryAcquire takes, at now, for the object obj, a share of every key, or
// of none when one of them is used up: it then returns that one and false,
// and obj stands in its line. release gives the shares back, and wakes the
// first object in line of each key. A nil workerShares bounds nothing.
func (s *workerShares) tryAcquire(now time.Time, obj types.NamespacedName, keys ...string) (release func(), busy busyShare, ok bool) {
	if s == nil {
		return func() {}, busyShare{}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		limit, timedOut := s.limit, s.onProbation[k]
		if timedOut != nil {
			limit = 1
		}
		if held := s.held[k]; len(held) >= limit {
			if !slices.Contains(s.lines[k], obj) {
				s.lines[k] = append(s.lines[k], obj)
			}
			return nil, busyShare{key: k, heldFor: now.Sub(slices.MinFunc(held, time.Time.Compare)), timedOut: timedOut}, false
		}
	}
	for _, k := range keys {
		s.held[k] = append(s.held[k], now)
		s.leaveLine(k, obj)
	}
	var once sync.Once
	return func() { once.Do(func() { s.release(now, keys) }) }, busyShare{}, true
}

// release gives back the shares of keys taken at when, and wakes the first
// object in line of each, one object per key.
func (s *workerShares) release(when time.Time, keys []string) {
	var woken []types.NamespacedName
	s.mu.Lock()
	for _, k := range keys {
		held := s.held[k]
		if i := slices.Index(held, when); i >= 0 {
			held = slices.Delete(held, i, i+1)
		}
		if len(held) == 0 {
			delete(s.held, k)
		} else {
			s.held[k] = held
		}
		// The first in line not woken for another key: objects stand in
		// the lines of several keys (a registry's and a namespace's).
		if i := slices.IndexFunc(s.lines[k], func(o types.NamespacedName) bool { return !slices.Contains(woken, o) }); i >= 0 {
			obj := s.lines[k][i]
			woken = append(woken, obj)
			s.leaveLine(k, obj)
		}
	}
	s.mu.Unlock()
	for _, obj := range woken {
		s.wake(obj)
	}
}

// wake runs obj again: its turn came, for a share of the workers or for
// what else it was put off for (a kept clone in use). A nil workerShares
// wakes nothing.
func (s *workerShares) wake(obj types.NamespacedName) {
	if s == nil {
		return
	}
	select {
	case s.woken <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name}}}:
	default:
		// The buffer is full: obj comes back at its retry.
	}
}

// settle records how the last call to the host of key went: timedOut, when
// it did not answer in time, puts key on probation, one run at a time, and
// nil (an answer, even a refusal) ends it. A nil workerShares records
// nothing.
func (s *workerShares) settle(key string, timedOut error) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if timedOut == nil {
		delete(s.onProbation, key)
		return
	}
	// Past the bound, a host that times out is not put on probation: its
	// runs still hold at most their share each.
	if _, ok := s.onProbation[key]; ok || len(s.onProbation) < maxProbation {
		s.onProbation[key] = timedOut
	}
}

// leaveLine takes obj out of the line of key. Callers hold s.mu.
func (s *workerShares) leaveLine(key string, obj types.NamespacedName) {
	line := slices.DeleteFunc(s.lines[key], func(o types.NamespacedName) bool { return o == obj })
	if len(line) == 0 {
		delete(s.lines, key)
	} else {
		s.lines[key] = line
	}
}
