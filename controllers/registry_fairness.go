package controllers

import (
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/types"
)

// registryBusyReason: a repository that has not been scanned yet waits
// because its registry or its namespace already holds its share of the
// scan workers.
const registryBusyReason = "RegistryBusy"

// busyRetry is how soon a scan that found no free share is tried again.
const busyRetry = 5 * time.Second

// quietFor is how long a new object waits without saying so, for a share
// of the workers or for its ImageRepository's first scan: both end within a
// scan, and writing the wait, and the event of its Ready change, for every
// new object would double what creating an ImageRepository and its
// ImagePolicy costs the API server. An object whose wait lasts longer, or
// one that already has a Ready condition, shows it.
const quietFor = 10 * time.Second

// maxQuietWaits bounds the new objects quietWaits remembers.
const maxQuietWaits = 4096

// quietWaits remembers when the controller first put off each new object
// (one without a Ready condition), so that its short waits write nothing.
// It counts from the first wait, not from the object's creation: a manager
// that starts, or falls behind, with many new objects still reports none
// of their short waits. The zero value is ready to use.
type quietWaits struct {
	mu    sync.Mutex
	since map[types.UID]time.Time
}

// wait returns err, a short wait of obj's run, as a silent retry after
// busyRetry while obj has no Ready condition and its first wait is less
// than quietFor ago, and as it is otherwise.
func (q *quietWaits) wait(obj conditions.Getter, now time.Time, err error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	uid := obj.GetUID()
	if conditions.Get(obj, meta.ReadyCondition) != nil {
		delete(q.since, uid)
		return err
	}
	if q.since == nil {
		q.since = map[types.UID]time.Time{}
	}
	first, ok := q.since[uid]
	if !ok {
		if len(q.since) >= maxQuietWaits {
			q.forgetBefore(now.Add(-quietFor))
		}
		if len(q.since) >= maxQuietWaits {
			return err
		}
		first = now
		q.since[uid] = now
	}
	if now.Sub(first) >= quietFor {
		delete(q.since, uid)
		return err
	}
	return &silentRetryError{err: err, retryAfter: busyRetry}
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

// busyError is the error of obj's run put off because key holds its share
// of the workers: RegistryBusy, retried after busyRetry, and silent while
// obj is new (see quietWaits).
func (q *quietWaits) busyError(obj conditions.Getter, now time.Time, what, key string) error {
	err := fmt.Errorf("waiting to %s: %s already holds its share of the workers", what, key)
	return q.wait(obj, now, transientAfter(registryBusyReason, err, busyRetry))
}

// workerShares bounds how many of a controller's workers one key may hold
// at once: a registry (its host, and the proxy requests go through) and a
// namespace each get at most limit. A registry that accepts connections
// and never answers then holds at most limit workers until the deadline of
// its calls, and the others serve every other registry and namespace. A
// caller that finds no share free does not wait for one: it comes back
// later, so no worker is spent waiting.
type workerShares struct {
	limit int
	mu    sync.Mutex
	held  map[string]int
}

// newWorkerShares returns shares of workers for a controller with that
// many workers: half of them each, and at least one.
func newWorkerShares(workers int) *workerShares {
	return &workerShares{limit: max(1, workers/2), held: map[string]int{}}
}

// tryAcquire takes a share of every key, or of none when one of them is
// used up, and returns the key that was and false. release gives the
// shares back. A nil workerShares bounds nothing.
func (s *workerShares) tryAcquire(keys ...string) (release func(), busy string, ok bool) {
	if s == nil {
		return func() {}, "", true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if s.held[k] >= s.limit {
			return nil, k, false
		}
	}
	for _, k := range keys {
		s.held[k]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, k := range keys {
				if s.held[k]--; s.held[k] <= 0 {
					delete(s.held, k)
				}
			}
		})
	}, "", true
}
