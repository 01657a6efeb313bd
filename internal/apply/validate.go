package apply

import (
	"context"
	"errors"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ssaDryRunErr is the error ssa returns when an object's dry-run fails.
type ssaDryRunErr = ssaerrors.DryRunErr

// validation is the outcome of the server-side dry-run of a set.
type validation struct {
	// planned holds each validated object's entry from the dry-run diff.
	planned map[object.ObjMetadata]ssa.ChangeSetEntry
	// results holds the entries of what is done: unchanged and skipped
	// objects, then applied ones.
	results map[object.ObjMetadata]ssa.ChangeSetEntry
	// changed are the objects that differ from the cluster.
	changed []*unstructured.Unstructured
	// deferred are the objects that can only be validated once the set's
	// CRDs and Namespaces are applied.
	deferred []*unstructured.Unstructured
	// failures are the objects the API server rejected.
	failures []ObjectFailure
}

// deferral decides which failed dry-runs are due to definitions of the set
// not being applied yet.
type deferral struct {
	// kinds are the kinds defined by CRDs of the set.
	kinds map[schema.GroupKind]crdDefinition
	// namespaces are the Namespaces of the set.
	namespaces map[string]bool
}

// newDeferral returns the deferral for a set.
func newDeferral(set []*unstructured.Unstructured, kinds map[schema.GroupKind]crdDefinition) deferral {
	d := deferral{kinds: kinds, namespaces: map[string]bool{}}
	for _, o := range set {
		if ssautils.IsNamespace(o) {
			d.namespaces[o.GetName()] = true
		}
	}
	return d
}

// defers tells whether the failed dry-run of o is to be retried after the
// definitions stage: its kind is defined by a CRD of the set that is not
// there yet or is being changed, or its namespace is created by the set.
func (d deferral) defers(o *unstructured.Unstructured, err error, planned map[object.ObjMetadata]ssa.ChangeSetEntry) bool {
	if _, ok := d.kinds[o.GroupVersionKind().GroupKind()]; ok && meta.IsNoMatchError(err) {
		return true
	}
	return d.crdChanging(o, planned) || apierrors.IsNotFound(err) && d.namespaces[o.GetNamespace()]
}

// crdChanging tells whether o is of a kind whose CRD in the set is about
// to be created or changed.
func (d deferral) crdChanging(o *unstructured.Unstructured, planned map[object.ObjMetadata]ssa.ChangeSetEntry) bool {
	def, ok := d.kinds[o.GroupVersionKind().GroupKind()]
	if !ok {
		return false
	}
	e, ok := planned[def.crd]
	return ok && (e.Action == ssa.CreatedAction || e.Action == ssa.ConfiguredAction)
}

// validateSet validates a whole set: its cluster-wide definitions first,
// then the other objects. Objects in a Namespace that the set creates, or
// of a kind whose CRD the set creates or changes, are deferred without a
// dry-run, which could only fail or test them against the old schema.
func validateSet(ctx context.Context, rm *ssa.ResourceManager, set []*unstructured.Unstructured, kinds map[schema.GroupKind]crdDefinition) (*validation, error) {
	d := newDeferral(set, kinds)
	var definitions, others, pending []*unstructured.Unstructured
	for _, o := range set {
		if ssautils.IsClusterDefinition(o) || ssautils.IsClassDefinition(o) {
			definitions = append(definitions, o)
		} else {
			others = append(others, o)
		}
	}
	v, err := validate(ctx, rm, definitions, d)
	if err != nil {
		return nil, err
	}
	created := map[string]bool{}
	for ns := range d.namespaces {
		id := object.ObjMetadata{Name: ns, GroupKind: schema.GroupKind{Kind: "Namespace"}}
		if e, ok := v.planned[id]; !ok || e.Action == ssa.CreatedAction {
			created[ns] = true
		}
	}
	var now []*unstructured.Unstructured
	for _, o := range others {
		if created[o.GetNamespace()] || d.crdChanging(o, v.planned) {
			pending = append(pending, o)
		} else {
			now = append(now, o)
		}
	}
	rest, err := validate(ctx, rm, now, d)
	if err != nil {
		return nil, err
	}
	v.absorb(rest)
	v.deferred = append(v.deferred, pending...)
	return v, nil
}

// validate dry-runs every object with ssa's diff, concurrently, and sorts
// them into unchanged, changed, deferred and failed. It returns an error
// only when the cluster cannot be reached.
func validate(ctx context.Context, rm *ssa.ResourceManager, objects []*unstructured.Unstructured, d deferral) (*validation, error) {
	entries := make([]*ssa.ChangeSetEntry, len(objects))
	errs := make([]error, len(objects))
	diffOpts := ssa.DefaultDiffOptions()
	diffOpts.Exclusions = map[string]string{ReconcileAnnotation: DisabledValue}

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i, o := range objects {
		g.Go(func() error {
			entry, _, _, err := rm.Diff(gctx, o, diffOpts)
			if err != nil && isUnreachable(err) {
				return err
			}
			entries[i], errs[i] = entry, err
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	v := &validation{planned: map[object.ObjMetadata]ssa.ChangeSetEntry{}, results: map[object.ObjMetadata]ssa.ChangeSetEntry{}}
	for i, o := range objects {
		if errs[i] != nil {
			continue
		}
		entry := *entries[i]
		if entry.Action == ssa.SkippedAction {
			// ssa names a skipped object after the cluster's copy, which
			// is empty when the object does not exist yet.
			entry = entryFor(o, ssa.SkippedAction)
		}
		v.planned[entry.ObjMetadata] = entry
		if entry.Action == ssa.CreatedAction || entry.Action == ssa.ConfiguredAction {
			v.changed = append(v.changed, o)
		} else {
			v.results[entry.ObjMetadata] = entry
		}
	}
	for i, o := range objects {
		switch {
		case errs[i] == nil:
		case d.defers(o, errs[i], v.planned):
			v.deferred = append(v.deferred, o)
		default:
			v.failures = append(v.failures, failureOf(o, errs[i]))
		}
	}
	return v, nil
}

// dryRun validates objects with a server-side dry-run apply each,
// concurrently, and returns the rejected ones. Unlike validate it does not
// read the objects from the cluster, as the objects it is given are
// about to be applied whatever they hold there. It returns an error only
// when the cluster cannot be reached.
func dryRun(ctx context.Context, c client.Client, objects []*unstructured.Unstructured) ([]ObjectFailure, error) {
	errs := make([]error, len(objects))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i, o := range objects {
		g.Go(func() error {
			err := c.Apply(gctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.DryRunAll, client.ForceOwnership, client.FieldOwner(FieldManager))
			if err != nil && isUnreachable(err) {
				return err
			}
			errs[i] = err
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var failures []ObjectFailure
	for i, o := range objects {
		if errs[i] != nil {
			failures = append(failures, failureOf(o, errs[i]))
		}
	}
	return failures, nil
}

// record stores the entries of an applied change set.
func (v *validation) record(cs *ssa.ChangeSet) {
	if cs == nil {
		return
	}
	for _, e := range cs.Entries {
		v.results[e.ObjMetadata] = e
	}
}

// absorb adds the outcome of another validation.
func (v *validation) absorb(other *validation) {
	for id, e := range other.planned {
		v.planned[id] = e
	}
	for id, e := range other.results {
		v.results[id] = e
	}
	v.changed = append(v.changed, other.changed...)
	v.deferred = append(v.deferred, other.deferred...)
	v.failures = append(v.failures, other.failures...)
}

// entries returns the known entries of a set, in the set's order.
func (v *validation) entries(set []*unstructured.Unstructured) []ssa.ChangeSetEntry {
	entries := make([]ssa.ChangeSetEntry, 0, len(set))
	for _, o := range set {
		if e, ok := v.results[object.UnstructuredToObjMetadata(o)]; ok {
			entries = append(entries, e)
		}
	}
	return entries
}

// skipped returns the objects left alone because of ReconcileAnnotation.
func (v *validation) skipped() map[object.ObjMetadata]bool {
	skipped := map[object.ObjMetadata]bool{}
	for id, e := range v.results {
		if e.Action == ssa.SkippedAction {
			skipped[id] = true
		}
	}
	return skipped
}

// entryFor returns a change set entry for o.
func entryFor(o *unstructured.Unstructured, action ssa.Action) ssa.ChangeSetEntry {
	return ssa.ChangeSetEntry{
		ObjMetadata:  object.UnstructuredToObjMetadata(o),
		GroupVersion: o.GroupVersionKind().Version,
		Subject:      ssautils.FmtUnstructured(o),
		Action:       action,
	}
}

// failureOf describes the rejection of o, with the API server's message.
func failureOf(o *unstructured.Unstructured, err error) ObjectFailure {
	var dryRun *ssaDryRunErr
	if errors.As(err, &dryRun) {
		err = dryRun.Unwrap()
	}
	return ObjectFailure{
		ID:      object.UnstructuredToObjMetadata(o).String(),
		Subject: ssautils.FmtUnstructured(o),
		Message: err.Error(),
	}
}
