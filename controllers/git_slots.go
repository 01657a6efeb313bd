package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// Defaults of the Git slots of a namespace.
const (
	// DefaultGitSessionsPerNamespace is how many Git sessions the objects
	// of one namespace may have open at once, across Syncs and automations:
	// fewer than the workers of a kind, so that a namespace whose Git
	// servers never answer leaves workers to the others.
	DefaultGitSessionsPerNamespace = 2
	// gitSlotWait is how long a run waits for a slot of its namespace
	// before it gives its worker back.
	gitSlotWait = time.Second
	// gitSlotRetry is when a run that found no slot runs again.
	gitSlotRetry = 2 * time.Second
	// gitSlotForget is how long a run that found no slot keeps its place
	// in its namespace's line without coming back (its object deleted, or
	// suspended).
	gitSlotForget = 3 * (gitSlotWait + gitSlotRetry)
)

// gitSlots bounds the Git sessions that the objects of one namespace have
// open at once, across every kind that reads Git. A session runs from the
// wait for the kept clone to its close: fetches, the build or the
// write-back, and pushes, each network call bounded by spec.git.timeout.
// A run that finds its namespace's slots taken waits at most gitSlotWait,
// then gives its worker back and is requeued (waitingError), so that one
// namespace holds at most perNamespace workers in Git work however many
// of its objects point at a server that never answers. Runs that found
// no slot take the next ones in the order they first asked, so that no
// object of a busy namespace waits forever behind others that retry
// faster.
type gitSlots struct {
	perNamespace int

	mu         sync.Mutex
	namespaces map[string]*namespaceSlots
	// freed is closed, and replaced, whenever a slot is released.
	freed chan struct{}
}

// namespaceSlots are the slots of one namespace in use and its line.
type namespaceSlots struct {
	inUse int
	// line are the runs that found no slot, first come first.
	line []slotWaiter
}

// slotWaiter is an object whose run found no slot.
type slotWaiter struct {
	id       string
	lastSeen time.Time
}

// newGitSlots returns the slots of perNamespace sessions per namespace; 0
// means DefaultGitSessionsPerNamespace.
func newGitSlots(perNamespace int) *gitSlots {
	if perNamespace <= 0 {
		perNamespace = DefaultGitSessionsPerNamespace
	}
	return &gitSlots{perNamespace: perNamespace, namespaces: map[string]*namespaceSlots{}, freed: make(chan struct{})}
}

// acquire takes a slot of namespace for the object id, waiting at most
// gitSlotWait for one, and returns the function that releases it (once).
// A nil gitSlots bounds nothing.
func (s *gitSlots) acquire(ctx context.Context, namespace, id string) (release func(), err error) {
	if s == nil {
		return func() {}, nil
	}
	timer := time.NewTimer(gitSlotWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if s.take(namespace, id) {
			s.mu.Unlock()
			return sync.OnceFunc(func() { s.release(namespace) }), nil
		}
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, waiting(uprevv1.GitSlotsBusyReason, gitSlotRetry,
				fmt.Errorf("waiting for Git: namespace %s has %d Git operations under way, the most one namespace may have", namespace, s.perNamespace))
		}
	}
}

// take gives id a slot of namespace when one is free and no one who asked
// before id is waiting for it; otherwise it puts id in the line. The
// caller holds s.mu.
func (s *gitSlots) take(namespace, id string) bool {
	ns := s.namespaces[namespace]
	if ns == nil {
		ns = &namespaceSlots{}
		s.namespaces[namespace] = ns
	}
	now := time.Now()
	ns.line = slices.DeleteFunc(ns.line, func(w slotWaiter) bool { return now.Sub(w.lastSeen) > gitSlotForget })
	place := slices.IndexFunc(ns.line, func(w slotWaiter) bool { return w.id == id })
	ahead := place
	if place < 0 {
		ahead = len(ns.line)
	}
	if ns.inUse+ahead < s.perNamespace {
		ns.inUse++
		if place >= 0 {
			ns.line = slices.Delete(ns.line, place, place+1)
		}
		return true
	}
	if place < 0 {
		ns.line = append(ns.line, slotWaiter{id: id, lastSeen: now})
	} else {
		ns.line[place].lastSeen = now
	}
	return false
}

// release gives a slot of namespace back and wakes the runs waiting.
func (s *gitSlots) release(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.namespaces[namespace]
	if ns.inUse--; ns.inUse <= 0 && len(ns.line) == 0 {
		delete(s.namespaces, namespace)
	}
	close(s.freed)
	s.freed = make(chan struct{})
}
