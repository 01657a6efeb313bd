package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// prune deletes the objects of previous that are not in current, objects
// before the Namespaces and CRDs that hold them. Each is read from the
// cluster first and deleted, at the version read, only when that copy is
// owner's (ownedBy): an inventory names what to look at, never what may
// be deleted, so an entry naming anyone else's object deletes nothing and
// is reported skipped. CRDs and Namespaces are only deleted when annotated
// PruneAnnotation: EnabledValue in the cluster; objects annotated
// ReconcileAnnotation or PruneAnnotation DisabledValue are never deleted.
// Entries whose deletion failed carry ssa.UnknownAction.
func prune(ctx context.Context, rm *ssa.ResourceManager, previous, current []Entry, owner Owner) ([]ssa.ChangeSetEntry, error) {
	if owner.IsZero() {
		return nil, ErrNoOwner
	}
	keep := make(map[string]bool, len(current))
	for _, e := range current {
		keep[e.ID] = true
	}
	var stale []*unstructured.Unstructured
	for _, e := range previous {
		if keep[e.ID] {
			continue
		}
		id, err := object.ParseObjMetadata(e.ID)
		if err != nil {
			return nil, fmt.Errorf("reading previous inventory: %w", err)
		}
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(id.GroupKind.WithVersion(e.Version))
		o.SetNamespace(id.Namespace)
		o.SetName(id.Name)
		stale = append(stale, o)
	}
	sort.Sort(sort.Reverse(ssa.SortableUnstructureds(stale)))

	var entries []ssa.ChangeSetEntry
	var errs []error
	for _, o := range stale {
		action, err := pruneOne(ctx, rm.Client(), o, owner)
		if err != nil {
			errs = append(errs, err)
		}
		entries = append(entries, entryFor(o, action))
	}
	if len(errs) > 0 {
		return entries, fmt.Errorf("pruning: %w", errors.Join(errs...))
	}
	return entries, nil
}

// pruneOne deletes o if the cluster's copy of it is owner's and may be
// pruned, and returns what it did: DeletedAction (also when o is gone
// already, or its kind is), SkippedAction, or UnknownAction with the
// error.
func pruneOne(ctx context.Context, c client.Client, o *unstructured.Unstructured, owner Owner) (ssa.Action, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
		switch {
		case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
			// Gone already, or its kind is, and its objects with it.
			return ssa.DeletedAction, nil
		default:
			return ssa.UnknownAction, fmt.Errorf("reading %s: %w", ssautils.FmtUnstructured(o), err)
		}
	}
	if !ownedBy(live, owner) {
		return ssa.SkippedAction, nil
	}
	if ssautils.AnyInMetadata(live, map[string]string{ReconcileAnnotation: DisabledValue, PruneAnnotation: DisabledValue}) {
		return ssa.SkippedAction, nil
	}
	if (ssautils.IsCRD(o) || ssautils.IsNamespace(o)) && live.GetAnnotations()[PruneAnnotation] != EnabledValue {
		return ssa.SkippedAction, nil
	}
	// At the version read: an object replaced or changed since is looked
	// at again by the next prune rather than deleted unseen.
	uid, version := live.GetUID(), live.GetResourceVersion()
	err := c.Delete(ctx, live, client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &uid, ResourceVersion: &version})
	switch {
	case err == nil, apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return ssa.DeletedAction, nil
	default:
		return ssa.UnknownAction, fmt.Errorf("deleting %s: %w", ssautils.FmtUnstructured(o), err)
	}
}

// ownedBy tells whether the cluster's copy of an object is owner's: it
// carries owner's OwnerNameLabel and OwnerNamespaceLabel, or, applied by
// an uprev from before these labels, carries neither label and has fields
// that uprev applied (a managedFields entry of FieldManager, operation
// Apply), as every object those versions applied has. The next Apply of a
// set labels its objects, so only objects that left every set before the
// upgrade are still recognised this way.
func ownedBy(live *unstructured.Unstructured, owner Owner) bool {
	labels := live.GetLabels()
	name, hasName := labels[OwnerNameLabel]
	namespace, hasNamespace := labels[OwnerNamespaceLabel]
	if hasName || hasNamespace {
		return hasName && hasNamespace && name == owner.Name && namespace == owner.Namespace
	}
	for _, f := range live.GetManagedFields() {
		if f.Manager == FieldManager && f.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// setOwnerLabels labels o as owner's, replacing any owner labels the
// manifest set.
func setOwnerLabels(o *unstructured.Unstructured, owner Owner) {
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, owner.labels())
	o.SetLabels(labels)
}

// stillInventoried returns the current inventory plus the stale entries
// whose deletion failed, so that a later apply retries them.
func stillInventoried(current []Entry, pruned []ssa.ChangeSetEntry) []Entry {
	for _, e := range pruned {
		if e.Action == ssa.UnknownAction {
			current = append(current, Entry{ID: e.ObjMetadata.String(), Version: e.GroupVersion})
		}
	}
	return current
}

// Delete deletes every object of inventory, as a prune to an empty set
// does: only objects labelled as opts.Owner's in the cluster (an error
// wrapping ErrNoOwner without one), objects before the Namespaces and
// CRDs that hold them, CRDs and Namespaces only when annotated
// PruneAnnotation: EnabledValue, and never objects annotated to be left
// alone. The Result's Inventory holds the
// entries whose deletion failed, for a later retry. It is what a Sync's
// deletion does to each target.
func (a *Applier) Delete(ctx context.Context, inventory []Entry, opts Options) (Result, error) {
	result := Result{ChangeSet: ssa.NewChangeSet()}
	ident, release, err := a.session(opts)
	if err != nil {
		return result, err
	}
	defer release()
	entries, err := prune(ctx, ident.rm, inventory, nil, opts.Owner)
	result.ChangeSet.Append(entries)
	result.Inventory = stillInventoried([]Entry{}, entries)
	if err != nil && isUnreachable(err) {
		err = &UnreachableError{Host: redactedHost(a.config.Host), Err: err}
	}
	return result, err
}
