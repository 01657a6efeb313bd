package controllers

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/apply"
)

// The Sync controller alone writes what a SyncTarget says of its target.
// +kubebuilder:rbac:groups=uprev.dev,resources=synctargets/status,verbs=get;patch;update

// targetRecord is the SyncTarget of one target during a run: what it
// should hold, and what was last written (nil while it does not exist).
// Only the goroutine applying its target touches it during a wave.
type targetRecord struct {
	obj     *uprevv1.SyncTarget
	written *uprevv1.SyncTarget
}

// inventory returns what the record says was applied to its target.
func (rec *targetRecord) inventory() []apply.Entry {
	entries := make([]apply.Entry, 0, len(rec.obj.Status.Inventory))
	for _, e := range rec.obj.Status.Inventory {
		entries = append(entries, apply.Entry{ID: e.ID, Version: e.Version})
	}
	return entries
}

// target is the target the record was last applied as.
func (rec *targetRecord) target() uprevv1.Target {
	return uprevv1.Target{Name: rec.obj.Spec.Target, KubeConfig: rec.obj.Spec.KubeConfig}
}

// loadRecords reads the SyncTargets of a Sync from the API server (never a
// cache: pruning must not read an old inventory). The targets of a Sync
// written by an earlier uprev, in status.targets, become records still to
// be written, for the targets its spec still names; the others were
// removed and are released, as before.
func (r *SyncReconciler) loadRecords(ctx context.Context, s *uprevv1.Sync) (map[string]*targetRecord, error) {
	var list uprevv1.SyncTargetList
	if err := r.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{uprevv1.SyncLabel: uprevv1.SyncLabelValue(s.Name)}); err != nil {
		return nil, fmt.Errorf("listing the SyncTargets of Sync %s/%s: %w", s.Namespace, s.Name, err)
	}
	records := map[string]*targetRecord{}
	for i := range list.Items {
		st := &list.Items[i]
		if st.Spec.Sync != s.Name {
			continue
		}
		if st.IsRecordOf(s) {
			obj := st.DeepCopy()
			// A record created by anyone but uprev has no status at all.
			obj.Status.Name = st.Spec.Target
			records[st.Spec.Target] = &targetRecord{obj: obj, written: st}
			continue
		}
		if st.Name != uprevv1.SyncTargetName(s.Name, st.Spec.Target) {
			// Not where uprev would write it: released as a removed target
			// is, never believed.
			obj := st.DeepCopy()
			obj.Status = uprevv1.TargetStatus{}
			records[st.Spec.Target+"\x00"+st.Name] = &targetRecord{obj: obj, written: st}
			continue
		}
		// At the record's name but not the Sync's own (an earlier Sync of
		// the same name, or made by someone else): nothing it says is
		// believed, and the next write makes it the Sync's, status and all.
		own := newRecord(s, uprevv1.Target{Name: st.Spec.Target}).obj
		obj := st.DeepCopy()
		obj.Labels, obj.OwnerReferences, obj.Spec, obj.Status = own.Labels, own.OwnerReferences, own.Spec, own.Status
		records[st.Spec.Target] = &targetRecord{obj: obj, written: st}
	}
	for _, legacy := range s.Status.Targets {
		i := slices.IndexFunc(s.Spec.Targets, func(t uprevv1.Target) bool { return t.Name == legacy.Name })
		if _, ok := records[legacy.Name]; ok || i < 0 {
			continue
		}
		rec := newRecord(s, s.Spec.Targets[i])
		rec.obj.Status = *legacy.DeepCopy()
		records[legacy.Name] = rec
	}
	return records, nil
}

// targetStatuses returns what each target of s reports: its SyncTarget's
// status, or, for a Sync its manager has not run since SyncTargets came,
// the entry of status.targets; by target name. Only the Sync's own
// records are read (SyncTarget.IsRecordOf): their status is written by
// uprev alone. c should not be a cache: SyncTargets are not cached.
func targetStatuses(ctx context.Context, c client.Reader, s *uprevv1.Sync) (map[string]uprevv1.TargetStatus, error) {
	statuses := map[string]uprevv1.TargetStatus{}
	for _, legacy := range s.Status.Targets {
		statuses[legacy.Name] = legacy
	}
	var list uprevv1.SyncTargetList
	if err := c.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{uprevv1.SyncLabel: uprevv1.SyncLabelValue(s.Name)}); err != nil {
		return nil, fmt.Errorf("listing the SyncTargets of Sync %s/%s: %w", s.Namespace, s.Name, err)
	}
	for _, st := range list.Items {
		if st.IsRecordOf(s) {
			ts := st.Status
			ts.Name = st.Spec.Target
			statuses[ts.Name] = ts
		}
	}
	return statuses, nil
}

// newRecord returns the record, not yet written, of a Sync's target:
// labelled with its Sync and owned by it, so that the garbage collector
// removes it with the Sync should uprev not.
func newRecord(s *uprevv1.Sync, target uprevv1.Target) *targetRecord {
	return &targetRecord{obj: &uprevv1.SyncTarget{
		TypeMeta: metav1.TypeMeta{APIVersion: uprevv1.GroupVersion.String(), Kind: uprevv1.SyncTargetKind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      uprevv1.SyncTargetName(s.Name, target.Name),
			Labels:    map[string]string{uprevv1.SyncLabel: uprevv1.SyncLabelValue(s.Name)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: uprevv1.GroupVersion.String(), Kind: uprevv1.SyncKind,
				Name: s.Name, UID: s.UID, Controller: ptr.To(true),
			}},
		},
		Spec:   uprevv1.SyncTargetSpec{Sync: s.Name, Target: target.Name, KubeConfig: target.KubeConfig},
		Status: uprevv1.TargetStatus{Name: target.Name},
	}}
}

// writeRecord writes a target's record when it changed since last
// written: its metadata and spec, creating it when new, then its status,
// through the status subresource that only uprev may write. A refused
// write is a StatusWriteFailed error: the target has not recorded what it
// did.
func (r *SyncReconciler) writeRecord(ctx context.Context, rec *targetRecord) error {
	w := rec.written
	if w != nil && sameRecordSpec(w, rec.obj) && equality.Semantic.DeepEqual(w.Status, rec.obj.Status) {
		return nil
	}
	fail := func(doing string, err error) error {
		return transient(uprevv1.StatusWriteFailedReason, fmt.Errorf("recording target %s in SyncTarget %s: %s: %w", rec.obj.Spec.Target, rec.obj.Name, doing, err))
	}
	status := rec.obj.Status.DeepCopy()
	switch {
	case w == nil:
		// Created without a status (the API server drops it): decoding
		// the answer leaves fields it lacks as they were.
		obj := rec.obj.DeepCopy()
		obj.Status = uprevv1.TargetStatus{}
		if err := r.Create(ctx, obj, client.FieldOwner(fieldManager)); err != nil {
			return fail("creating it", err)
		}
		w = obj
	case !sameRecordSpec(w, rec.obj):
		obj := rec.obj.DeepCopy()
		obj.Status = *w.Status.DeepCopy()
		if err := r.Patch(ctx, obj, client.MergeFrom(w), client.FieldOwner(fieldManager)); err != nil {
			return fail("patching it", err)
		}
		w = obj
	}
	rec.written = w
	rec.obj.ObjectMeta = *w.ObjectMeta.DeepCopy()
	if equality.Semantic.DeepEqual(w.Status, *status) {
		return nil
	}
	obj := w.DeepCopy()
	obj.Status = *status
	if err := r.Status().Patch(ctx, obj, client.MergeFrom(w), client.FieldOwner(fieldManager)); err != nil {
		return fail("patching its status", err)
	}
	rec.written = obj
	rec.obj.ObjectMeta = *obj.ObjectMeta.DeepCopy()
	return nil
}

// sameRecordSpec tells whether two versions of a record agree on what
// makes it the Sync's own: its spec, labels and owners.
func sameRecordSpec(a, b *uprevv1.SyncTarget) bool {
	return equality.Semantic.DeepEqual(a.Spec, b.Spec) &&
		equality.Semantic.DeepEqual(a.Labels, b.Labels) &&
		equality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences)
}

// syncOwner is the Owner a Sync applies as: every object it applies is
// labelled with its namespace and name (apply.OwnerNamespaceLabel and
// apply.OwnerNameLabel, the name as uprevv1.SyncLabelValue), and prune
// deletes only objects so labelled, whatever a record's inventory says.
func syncOwner(s *uprevv1.Sync) apply.Owner {
	return apply.Owner{Name: uprevv1.SyncLabelValue(s.Name), Namespace: s.Namespace}
}

// deleteRecords removes every SyncTarget of a Sync, in one request.
func (r *SyncReconciler) deleteRecords(ctx context.Context, s *uprevv1.Sync) error {
	err := r.DeleteAllOf(ctx, &uprevv1.SyncTarget{}, client.InNamespace(s.Namespace), client.MatchingLabels{uprevv1.SyncLabel: uprevv1.SyncLabelValue(s.Name)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the SyncTargets of Sync %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}
