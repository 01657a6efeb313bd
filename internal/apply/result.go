package apply

import (
	"github.com/fluxcd/pkg/ssa"
)

// Entry is one object of an inventory: what a Sync applied to a cluster,
// remembered so that objects leaving the set can be pruned.
type Entry struct {
	// ID is <namespace>_<name>_<group>_<kind>, the format of Flux's
	// inventories (cli-utils ObjMetadata); colons in RBAC names are written
	// as double underscores.
	ID string
	// Version is the version part of the object's apiVersion.
	Version string
}

// Health says whether the applied objects were found healthy.
type Health string

const (
	// HealthNotChecked means the apply did not wait for health.
	HealthNotChecked Health = ""
	// HealthHealthy means every applied object reached kstatus Current.
	HealthHealthy Health = "Healthy"
	// HealthUnhealthy means some object failed or did not become Current
	// within the timeout; the error is a *HealthError that names them.
	HealthUnhealthy Health = "Unhealthy"
)

// Result is what an Apply did to one cluster.
type Result struct {
	// ChangeSet has one entry per object of the set (created, configured,
	// unchanged or skipped) followed by one per pruned object (deleted, or
	// skipped when a prune was refused).
	ChangeSet *ssa.ChangeSet
	// Inventory lists every object of the applied set, in apply order. It is
	// nil when nothing of the set was applied.
	Inventory []Entry
	// Health is the outcome of the health check.
	Health Health
}

// IDs returns the inventory ids of the change set entries with the given
// action.
func (r Result) IDs(action ssa.Action) []string {
	if r.ChangeSet == nil {
		return nil
	}
	var ids []string
	for _, e := range r.ChangeSet.Entries {
		if e.Action == action {
			ids = append(ids, e.ObjMetadata.String())
		}
	}
	return ids
}

// Created returns the ids of the objects that did not exist before.
func (r Result) Created() []string { return r.IDs(ssa.CreatedAction) }

// Configured returns the ids of the objects that existed and differed from
// the set. When the set is the same revision as the previous apply, these
// are the objects that drifted (were changed in the cluster directly) and
// have been changed back.
func (r Result) Configured() []string { return r.IDs(ssa.ConfiguredAction) }

// Unchanged returns the ids of the objects that already matched the set.
func (r Result) Unchanged() []string { return r.IDs(ssa.UnchangedAction) }

// Deleted returns the ids of the pruned objects.
func (r Result) Deleted() []string { return r.IDs(ssa.DeletedAction) }

// Skipped returns the ids of the objects left alone: annotated
// uprev.dev/reconcile: disabled, or stale objects whose prune was refused.
func (r Result) Skipped() []string { return r.IDs(ssa.SkippedAction) }

// Changed tells whether the apply created, configured or deleted anything.
func (r Result) Changed() bool {
	if r.ChangeSet == nil {
		return false
	}
	for _, e := range r.ChangeSet.Entries {
		switch e.Action {
		case ssa.CreatedAction, ssa.ConfiguredAction, ssa.DeletedAction:
			return true
		}
	}
	return false
}
