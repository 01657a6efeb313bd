package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// errHistoryRewritten means the remote branch no longer contains the commit
// the kept clone had fetched before.
var errHistoryRewritten = errors.New("remote branch history was rewritten")

// errStaleClone means a kept clone uses an object store other than its
// repository's newest, or none.
var errStaleClone = errors.New("the kept clone uses an old object store")

// Cache keeps clones of repositories under a directory. Each repository
// URL has one object store and kept clones that read and fetch into it: a
// working tree per branch read, and one each for tags, commits and commits
// of a branch, so that a repository is fetched and stored once however
// many of its branches, tags and commits are checked out. A clone is
// shared by every user of that repository and branch (or tags, or
// commits). A use locks its clone, fetches what is new, and works in its
// working tree; a clone that is damaged, or whose remote branch was
// rewritten, is replaced by a fresh one in a fresh object store.
//
// Users name themselves as owners when they open a clone; Release ends an
// owner's claim, and Sweep (run every 15 seconds by Start) removes the
// clones no owner claims once they are unused for 30 seconds, and the
// object stores no clone uses.
//
// The locks are in-process: one Cache per directory and process.
type Cache struct {
	root  string
	clock clock.WithTicker
	log   logr.Logger

	mu           sync.Mutex
	repositories map[string]*repository
	// owners are the claims: the clone each owner opened last.
	owners map[string]*keptClone

	cloneCount atomic.Int64
	fetchCount atomic.Int64
}

// keptClone is one checkout of the cache and the lock of its users.
type keptClone struct {
	// name names the checkout in its repository, and the refs it fetches
	// into the object store: refs/remotes/<name>/.
	name       string
	repository *repository
	dir        string
	lock       chan struct{}
	// tree is what the last user knew of the clone's index. Only the
	// holder of lock reads or writes it. It is kept in memory, so a clone
	// found on disk after a restart is first checked in full.
	tree worktreeState
	// store is the object store the checkout on disk uses, nil when there
	// is no checkout or its store is unknown. The Cache's mutex guards it
	// and the fields below.
	store *objectStore
	// users counts the sessions that hold or wait for lock.
	users int
	// waiting are the users that found lock taken and did not wait for it
	// (WakeWhenFree), in the order they came: when the lock is given back,
	// the first is woken.
	waiting []waiter
	// lastUsed is when the last session closed, or when the clone was
	// found on disk.
	lastUsed time.Time
}

// CacheStats counts the network operations of a Cache.
type CacheStats struct {
	// Clones counts kept clones made, first ones and replacements. A
	// clone made in an object store that other clones of the repository
	// use fetches only what the store lacks.
	Clones int64
	// Fetches counts incremental fetches into kept clones, one per use of
	// a clone that was already there.
	Fetches int64
}

// CacheOptions tunes a Cache.
type CacheOptions struct {
	// Clock tells when clones are used and when Start sweeps; nil means
	// the real clock.
	Clock clock.WithTicker
	// Log receives what Start could not remove; the zero Logger discards.
	Log logr.Logger
}

// NewCache returns a Cache that keeps its clones under root, with the
// default options.
func NewCache(root string) (*Cache, error) {
	return NewCacheWithOptions(root, CacheOptions{})
}

// NewCacheWithOptions returns a Cache that keeps its clones under root,
// creating it. What a previous process left there is kept for its users
// to come back to, and swept like any unclaimed clone otherwise; clones
// and stores it was still writing are removed at once.
func NewCacheWithOptions(root string, opts CacheOptions) (*Cache, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("creating clone cache directory: %w", err)
	}
	c := &Cache{root: root, clock: opts.Clock, log: opts.Log, repositories: map[string]*repository{}, owners: map[string]*keptClone{}}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if err := c.load(); err != nil {
		return nil, fmt.Errorf("loading the clone cache: %w", err)
	}
	return c, nil
}

// Stats returns how many clones and fetches the cache has made.
func (c *Cache) Stats() CacheStats {
	return CacheStats{Clones: c.cloneCount.Load(), Fetches: c.fetchCount.Load()}
}
