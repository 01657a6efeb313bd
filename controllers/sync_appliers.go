package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/uprev-dev/uprev/internal/apply"
)

// localConnection is the connection key of the cluster uprev runs in.
const localConnection = "local"

// targetAppliers keeps the Appliers of the targets of every Sync, so that
// remembered versions are reused across reconciles (an Applier holds its
// clients only while it applies; discovery is shared per API server by
// apply.Shared), and shares one Applier between the targets, of any Syncs,
// that reach one API server as one user: those whose kubeconfigs have one
// kubeconfig.ConnectionKey (server, CA, proxy and every credential
// field). Targets of different credentials never share an Applier, so
// nothing one user's client learned (discovery, the versions it verified)
// serves another. A target's entry is replaced when its kubeconfig
// changes, dropped when the target leaves its Sync or the Sync goes; an
// Applier no target uses is dropped with its last one.
type targetAppliers struct {
	mu     sync.Mutex
	bySync map[types.NamespacedName]map[string]keptApplier
	byConn map[string]*sharedApplier
}

// keptApplier is what a target's Applier was made from.
type keptApplier struct {
	// source identifies the kubeconfig: its SHA-256, or "local".
	source string
	// conn is its connection key, the Applier's key in byConn.
	conn string
}

// sharedApplier is an Applier and how many targets use it.
type sharedApplier struct {
	applier *apply.Applier
	users   int
}

// get returns the Applier of a Sync's target made from source, if kept.
func (t *targetAppliers) get(sync types.NamespacedName, target, source string) (*apply.Applier, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k, ok := t.bySync[sync][target]
	if !ok || k.source != source {
		return nil, false
	}
	return t.byConn[k.conn].applier, true
}

// put keeps, for a Sync's target made from source, the Applier of
// connection conn: the one kept for it, or one that newApplier makes. The
// target's earlier Applier, if any, is released.
func (t *targetAppliers) put(sync types.NamespacedName, target, source, conn string, newApplier func() (*apply.Applier, error)) (*apply.Applier, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	shared, ok := t.byConn[conn]
	if !ok {
		a, err := newApplier()
		if err != nil {
			return nil, err
		}
		shared = &sharedApplier{applier: a}
		if t.byConn == nil {
			t.byConn = map[string]*sharedApplier{}
		}
		t.byConn[conn] = shared
	}
	if t.bySync == nil {
		t.bySync = map[types.NamespacedName]map[string]keptApplier{}
	}
	if t.bySync[sync] == nil {
		t.bySync[sync] = map[string]keptApplier{}
	}
	if old, ok := t.bySync[sync][target]; ok {
		t.release(old.conn)
	}
	shared.users++
	t.bySync[sync][target] = keptApplier{source: source, conn: conn}
	return shared.applier, nil
}

// retain drops the Appliers of a Sync's targets that keep does not hold.
func (t *targetAppliers) retain(sync types.NamespacedName, keep map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for target, k := range t.bySync[sync] {
		if !keep[target] {
			t.release(k.conn)
			delete(t.bySync[sync], target)
		}
	}
}

// forget drops every Applier of a Sync.
func (t *targetAppliers) forget(sync types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range t.bySync[sync] {
		t.release(k.conn)
	}
	delete(t.bySync, sync)
}

// release counts one user less of the Applier of conn, and drops it when
// none is left, with the versions it remembers. The caller holds mu.
func (t *targetAppliers) release(conn string) {
	if shared, ok := t.byConn[conn]; ok {
		if shared.users--; shared.users <= 0 {
			shared.applier.Close()
			delete(t.byConn, conn)
		}
	}
}
