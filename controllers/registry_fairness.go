package controllers

import (
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
)

// registryBusyReason: a repository that has not been scanned yet waits
// because its registry or its namespace already holds its share of the
// scan workers.
const registryBusyReason = "RegistryBusy"

// busyRetry is how soon a scan that found no free share is tried again.
const busyRetry = 5 * time.Second

// quietFor is how long after its creation a new object waits without
// saying so, for a share of the workers or for its ImageRepository's first
// scan: both end within a scan, and writing the wait, and the event of its
// Ready change, for every new object would double what creating an
// ImageRepository and its ImagePolicy costs the API server. An object older
// than that, or one whose wait lasts, shows it.
const quietFor = 10 * time.Second

// quietWhileNew returns err, a short wait of obj's run, as a silent retry
// after busyRetry while obj is younger than quietFor and has no Ready
// condition yet, and as it is otherwise.
func quietWhileNew(obj conditions.Getter, now time.Time, err error) error {
	if conditions.Get(obj, meta.ReadyCondition) == nil && now.Sub(obj.GetCreationTimestamp().Time) < quietFor {
		return &silentRetryError{err: err, retryAfter: busyRetry}
	}
	return err
}

// busyError is the error of obj's run put off because key holds its share
// of the workers: RegistryBusy, retried after busyRetry, and silent while
// obj is new (quietWhileNew).
func busyError(obj conditions.Getter, now time.Time, what, key string) error {
	err := fmt.Errorf("waiting to %s: %s already holds its share of the workers", what, key)
	return quietWhileNew(obj, now, transientAfter(registryBusyReason, err, busyRetry))
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
