package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

const (
	// unusedGrace is how long a kept clone that no owner claims stays on
	// disk after its last use.
	unusedGrace = 30 * time.Second
	// sweepInterval is how often Start sweeps. With unusedGrace, a clone
	// is removed within 45 seconds of its last owner releasing it.
	sweepInterval = 15 * time.Second
)

// Release ends the claim of owner, which no longer needs a kept clone: the
// object it names was deleted. The sweep removes a clone no owner claims
// once it has not been used for 30 seconds. Owner is no longer woken when
// the clone it found in use frees (WakeWhenFree).
func (c *Cache) Release(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kc := c.owners[owner]; kc != nil {
		kc.waiting = slices.DeleteFunc(kc.waiting, func(w waiter) bool { return w.owner == owner })
	}
	delete(c.owners, owner)
}

// Sweep removes from disk, and forgets, every kept clone that no owner
// claims, no session uses or waits for, and that was last used at least 30
// seconds before now; then every object store that no session reads and
// no remaining clone uses, and every repository left with neither. A clone
// is moved to the trash before it is removed, so that a crash never leaves
// a half removed clone where a user would find it; what an earlier removal
// left in the trash is removed too.
func (c *Cache) Sweep(now time.Time) error {
	var errs []error
	c.mu.Lock()
	claimed := make(map[*keptClone]bool, len(c.owners))
	for _, kc := range c.owners {
		claimed[kc] = true
	}
	trash := func(path string) {
		_, err := c.trash(path)
		errs = append(errs, err)
	}
	for key, r := range c.repositories {
		used := map[*objectStore]bool{}
		for name, kc := range r.clones {
			if kc.users > 0 || claimed[kc] || now.Sub(kc.lastUsed) < unusedGrace {
				used[kc.store] = true
				continue
			}
			delete(r.clones, name)
			trash(kc.dir)
			if kc.store != nil {
				// The refs the clone fetched, which no other clone reads.
				trash(filepath.Join(kc.store.dir, "refs", "remotes", name))
			}
		}
		for gen, st := range r.stores {
			if st.pins == 0 && !used[st] {
				delete(r.stores, gen)
				trash(st.dir)
			}
		}
		if len(r.clones) == 0 && len(r.stores) == 0 {
			delete(c.repositories, key)
			trash(r.dir)
		}
	}
	c.mu.Unlock()
	return errors.Join(append(errs, c.emptyTrash())...)
}

// emptyTrash removes what is in the trash.
func (c *Cache) emptyTrash() error {
	dir := filepath.Join(c.root, trashDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading the trash: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("emptying the trash: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Start sweeps every 15 seconds until ctx is done, logging what it could
// not remove to the logger of CacheOptions. It makes the Cache a
// controller-runtime Runnable, for the manager to start and stop.
func (c *Cache) Start(ctx context.Context) error {
	ticker := c.clock.NewTicker(sweepInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			if err := c.Sweep(c.clock.Now()); err != nil {
				c.log.Error(err, "Removing unused Git clones")
			}
		}
	}
}

// NeedLeaderElection reports false: every replica sweeps its own disk.
func (c *Cache) NeedLeaderElection() bool {
	return false
}
