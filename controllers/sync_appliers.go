package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/uprev-dev/uprev/internal/apply"
)

// targetAppliers keeps the Applier of each Sync target, so discovery and
// connections are reused across reconciles. An entry is replaced when the
// target's kubeconfig changes and forgotten with its Sync, so the map holds
// live targets only.
type targetAppliers struct {
	mu     sync.Mutex
	bySync map[types.NamespacedName]map[string]keptApplier
}

// keptApplier is an Applier and the kubeconfig it was made from.
type keptApplier struct {
	// source identifies the kubeconfig: its SHA-256, or "local".
	source  string
	applier *apply.Applier
}

// get returns the Applier of a Sync's target made from source, if kept.
func (t *targetAppliers) get(sync types.NamespacedName, target, source string) (*apply.Applier, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k, ok := t.bySync[sync][target]
	if !ok || k.source != source {
		return nil, false
	}
	return k.applier, true
}

// put keeps the Applier of a Sync's target, replacing any other.
func (t *targetAppliers) put(sync types.NamespacedName, target, source string, a *apply.Applier) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bySync == nil {
		t.bySync = map[types.NamespacedName]map[string]keptApplier{}
	}
	if t.bySync[sync] == nil {
		t.bySync[sync] = map[string]keptApplier{}
	}
	t.bySync[sync][target] = keptApplier{source: source, applier: a}
}

// forget drops every Applier of a Sync.
func (t *targetAppliers) forget(sync types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.bySync, sync)
}
