package controllers

import (
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// registryBusyReason: a repository that has not been scanned yet waits
// because its registry or its namespace already holds its share of the
// scan workers.
const registryBusyReason = "RegistryBusy"

// busyRetry is how soon a scan that found no free share is tried again.
const busyRetry = 5 * time.Second

// busyQuietFor is how long after its creation an object waits for a share
// without saying so: a share frees within a scan, and writing the wait, and
// the event of its Ready change, for every new object of a busy registry
// would double what creating a repository and its policy costs the API
// server. An object older than that, or one whose wait lasts, shows it.
const busyQuietFor = 10 * time.Second

// busyError is the error of obj's run put off because key holds its share
// of the workers: retried after busyRetry, silently while obj is younger
// than busyQuietFor, and otherwise as RegistryBusy on its status, with what.
func busyError(obj client.Object, now time.Time, what, key string) error {
	err := fmt.Errorf("waiting to %s: %s already holds its share of the workers", what, key)
	if now.Sub(obj.GetCreationTimestamp().Time) < busyQuietFor {
		return &silentRetryError{err: err, retryAfter: busyRetry}
	}
	return transientAfter(registryBusyReason, err, busyRetry)
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
