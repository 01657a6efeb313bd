package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/apply"
)

// finish brings the records in line with the targets once the rollout
// did what it could: records of a Sync written by an earlier uprev are all
// written, then its status.targets emptied; the records of pending
// targets say why they wait; the records of targets no longer in the Sync
// are deleted (the targets are released, their objects left in place);
// and each step's counts are set.
func (r *SyncReconciler) finish(ctx context.Context, run *syncRun) error {
	s := run.sync
	if len(s.Status.Targets) > 0 {
		for _, name := range slices.Sorted(maps.Keys(run.records)) {
			if err := r.writeRecord(ctx, run.records[name]); err != nil {
				return err
			}
		}
		s.Status.Targets = nil
	}
	for _, p := range run.pending {
		rec := run.record(p.target)
		rec.obj.Status.Reason = uprevv1.ClusterNotProvisionedReason
		rec.obj.Status.Message = p.message
		if err := r.writeRecord(ctx, rec); err != nil {
			return err
		}
	}
	if run.waves != nil {
		current := map[string]bool{}
		for _, p := range run.pending {
			current[p.target.Name] = true
		}
		for _, wave := range run.waves {
			for _, t := range wave {
				current[t.Name] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(run.records)) {
			rec := run.records[name]
			if current[name] || rec.written == nil {
				continue
			}
			if err := r.Delete(ctx, rec.written); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("releasing target %s: deleting SyncTarget %s: %w", name, rec.written.Name, err)
			}
			delete(run.records, name)
		}
		r.appliers.retain(client.ObjectKeyFromObject(s), current)
		s.Status.Steps = stepCounts(run.waves, s.Status.Steps, s.Status.LastAttemptedRevision, run.status)
	}
	return nil
}

// recordInventory writes a target's inventory into its record before the
// target is written to, so that a manager that dies mid-apply prunes, on
// its next run, what it had written.
func (r *SyncReconciler) recordInventory(ctx context.Context, rec *targetRecord, inventory []apply.Entry) error {
	setInventory(&rec.obj.Status, inventory)
	return r.writeRecord(ctx, rec)
}

// setInventory makes a target's status list inventory.
func setInventory(ts *uprevv1.TargetStatus, inventory []apply.Entry) {
	ts.Inventory = ts.Inventory[:0]
	for _, e := range inventory {
		ts.Inventory = append(ts.Inventory, uprevv1.InventoryEntry{ID: e.ID, Version: e.Version})
	}
}

// recordTarget writes a target's outcome into its record and records an
// event when something changed in the cluster.
func (r *SyncReconciler) recordTarget(run *syncRun, rec *targetRecord, res targetResult) {
	s := run.sync
	ts := &rec.obj.Status
	ts.Reason = ""
	if res.result.Inventory != nil {
		setInventory(ts, res.result.Inventory)
	}
	if res.result.Changed() {
		r.Events.Eventf(s, nil, corev1.EventTypeNormal, "Applied", "Apply", "%s to %s: %s",
			run.revision, res.target.Name, changeSummary(res.result))
	}
	if errors.Is(res.err, apply.ErrWaitCancelled) {
		// No outcome: the run queued already applies the target again and
		// waits anew. Recording the revision as attempted would show the
		// target as failed, and count it against maxFailures, meanwhile.
		// Health on the applied revision stays; a new one is not healthy yet.
		if ts.LastAppliedRevision != run.revision {
			ts.Healthy, ts.HealthySince = false, nil
		}
		ts.Message = cutMessage(res.err.Error(), maxTargetMessage)
		return
	}
	ts.LastAttemptedRevision = run.revision
	ts.Healthy = res.result.Health == apply.HealthHealthy
	ts.HealthySince = healthySince(ts.HealthySince, ts.LastAppliedRevision, run.revision, ts.Healthy && res.err == nil, r.Clock.Now())
	if res.err != nil {
		ts.Healthy = false
		ts.Message = cutMessage(res.err.Error(), maxTargetMessage)
	} else {
		// The time a revision reached the target: applying it again (every
		// interval, correcting drift) keeps it, so that the pause before
		// the next wave counts from when this wave got the revision.
		if ts.LastAppliedRevision != run.revision || ts.LastAppliedTime == nil {
			now := metav1.NewTime(r.Clock.Now())
			ts.LastAppliedTime = &now
		}
		ts.LastAppliedRevision = run.revision
		ts.Components, ts.ComponentsOmitted = appliedComponents(run.objects, res.result, s.Namespace)
		ts.Message = fmt.Sprintf("applied %d objects", len(res.result.Inventory))
	}
}

// healthySince is when a target has been healthy since, after a run that
// applied revision to it, where it had applied previous before: the time
// it had when it stays healthy on the same revision, now when it just
// became healthy or is healthy on a new revision, and nil when it is not
// healthy.
func healthySince(since *metav1.Time, previous, revision string, healthy bool, now time.Time) *metav1.Time {
	switch {
	case !healthy:
		return nil
	case since != nil && previous == revision:
		return since
	default:
		t := metav1.NewTime(now)
		return &t
	}
}

// changeSummary lists what an apply created, configured (drift included)
// and deleted.
func changeSummary(res apply.Result) string {
	var parts []string
	for _, group := range []struct {
		verb string
		ids  []string
	}{{"created", res.Created()}, {"configured", res.Configured()}, {"deleted", res.Deleted()}} {
		if len(group.ids) == 0 {
			continue
		}
		shown := group.ids[:min(len(group.ids), 10)]
		line := group.verb + " " + strings.Join(shown, ", ")
		if more := len(group.ids) - len(shown); more > 0 {
			line += fmt.Sprintf(" and %d more", more)
		}
		parts = append(parts, line)
	}
	return strings.Join(parts, "; ")
}

// summary is the Ready message of a reconcile.
func (run *syncRun) summary() string {
	if run.done == len(run.waves) {
		targets := 0
		for _, wave := range run.waves {
			targets += len(wave)
		}
		msg := fmt.Sprintf("applied %s to %d targets", run.revision, targets)
		if len(run.pending) > 0 {
			waiting := make([]uprevv1.Target, 0, len(run.pending))
			for _, p := range run.pending {
				waiting = append(waiting, p.target)
			}
			msg += fmt.Sprintf("; %d Clusters not provisioned yet: %s", len(waiting), targetNames(waiting))
		}
		return msg
	}
	msg := fmt.Sprintf("rollout of %s: %d of %d waves done", run.revision, run.done, len(run.waves))
	if run.pause > 0 {
		msg += fmt.Sprintf(", next wave in %s", run.pause.Round(time.Second))
	}
	return msg
}
