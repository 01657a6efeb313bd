package apply

import (
	"context"
	"errors"
	"fmt"
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
// before the Namespaces and CRDs that hold them. CRDs and Namespaces are
// only deleted when annotated PruneAnnotation: EnabledValue in the
// cluster; objects annotated ReconcileAnnotation or PruneAnnotation
// DisabledValue are never deleted. Entries whose deletion failed carry
// ssa.UnknownAction.
func prune(ctx context.Context, rm *ssa.ResourceManager, previous, current []Entry) ([]ssa.ChangeSetEntry, error) {
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

	opts := ssa.DeleteOptions{
		PropagationPolicy: metav1.DeletePropagationBackground,
		Exclusions:        map[string]string{ReconcileAnnotation: DisabledValue, PruneAnnotation: DisabledValue},
	}
	var entries []ssa.ChangeSetEntry
	var errs []error
	for _, o := range stale {
		if ssautils.IsCRD(o) || ssautils.IsNamespace(o) {
			allowed, err := pruneEnabled(ctx, rm.Client(), o)
			if err != nil {
				entries = append(entries, entryFor(o, ssa.UnknownAction))
				errs = append(errs, err)
				continue
			}
			if !allowed {
				entries = append(entries, entryFor(o, ssa.SkippedAction))
				continue
			}
		}
		entry, err := rm.Delete(ctx, o, opts)
		switch {
		case err != nil && meta.IsNoMatchError(err):
			// The kind is gone, and its objects with it.
			entries = append(entries, entryFor(o, ssa.DeletedAction))
		case err != nil:
			entries = append(entries, entryFor(o, ssa.UnknownAction))
			errs = append(errs, err)
		default:
			entries = append(entries, *entry)
		}
	}
	if len(errs) > 0 {
		return entries, fmt.Errorf("pruning: %w", errors.Join(errs...))
	}
	return entries, nil
}

// pruneEnabled tells whether the cluster's copy of o allows pruning it;
// an object that is already gone may be "pruned" (nothing happens).
func pruneEnabled(ctx context.Context, c client.Client, o *unstructured.Unstructured) (bool, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("reading %s: %w", ssautils.FmtUnstructured(o), err)
	}
	return live.GetAnnotations()[PruneAnnotation] == EnabledValue, nil
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
// does: objects before the Namespaces and CRDs that hold them, CRDs and
// Namespaces only when annotated PruneAnnotation: EnabledValue, and never
// objects annotated to be left alone. The Result's Inventory holds the
// entries whose deletion failed, for a later retry. It is what a Sync's
// deletion does to each target.
func (a *Applier) Delete(ctx context.Context, inventory []Entry, opts Options) (Result, error) {
	result := Result{ChangeSet: ssa.NewChangeSet()}
	ident, err := a.identityFor(opts)
	if err != nil {
		return result, err
	}
	entries, err := prune(ctx, ident.rm, inventory, nil)
	result.ChangeSet.Append(entries)
	result.Inventory = stillInventoried([]Entry{}, entries)
	if err != nil && isUnreachable(err) {
		err = &UnreachableError{Host: redactedHost(a.config.Host), Err: err}
	}
	return result, err
}
