package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// applyInParallel applies validated objects with ssa's ApplyAll, split
// into parallelApplies slices applied at once: ApplyAll writes the objects
// of one call one after the other, which makes a large set wait on
// round-trips rather than on the API server. Webhook configurations, which
// ssa orders last so that they cannot block the objects they serve, are
// applied after everything else.
func applyInParallel(ctx context.Context, rm *ssa.ResourceManager, objects []*unstructured.Unstructured, opts ssa.ApplyOptions, v *validation) error {
	sort.Sort(ssa.SortableUnstructureds(objects))
	var first, last []*unstructured.Unstructured
	for _, o := range objects {
		if slices.Contains(ssa.ReconcileOrder.Last, o.GetKind()) {
			last = append(last, o)
		} else {
			first = append(first, o)
		}
	}
	size := (len(first) + parallelApplies - 1) / parallelApplies
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for chunk := range slices.Chunk(first, max(size, 1)) {
		g.Go(func() error {
			cs, err := rm.ApplyAll(gctx, chunk, opts)
			mu.Lock()
			defer mu.Unlock()
			v.record(cs)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if len(last) == 0 {
		return nil
	}
	cs, err := rm.ApplyAll(ctx, last, opts)
	v.record(cs)
	return err
}

// applyError turns an error of ssa's apply into a *ValidationError when the
// API rejected an object's dry-run, and wraps it otherwise.
func applyError(doing string, err error) error {
	var dryRun *ssaDryRunErr
	if errors.As(err, &dryRun) && !isUnreachable(err) {
		return &ValidationError{Failures: []ObjectFailure{failureOf(dryRun.InvolvedObject(), dryRun.Unwrap())}}
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// inventory lists the objects of a set.
func inventory(set []*unstructured.Unstructured) []Entry {
	entries := make([]Entry, 0, len(set))
	for _, o := range set {
		entries = append(entries, Entry{
			ID:      object.UnstructuredToObjMetadata(o).String(),
			Version: o.GroupVersionKind().Version,
		})
	}
	return entries
}

// union returns the entries of a followed by those of b that a lacks: the
// inventory of a partly applied set, which must still cover the previous
// objects so that they are pruned once a revision applies whole.
func union(a, b []Entry) []Entry {
	seen := make(map[string]bool, len(a))
	out := make([]Entry, 0, len(a)+len(b))
	for _, e := range a {
		seen[e.ID] = true
		out = append(out, e)
	}
	for _, e := range b {
		if !seen[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

// definedKinds returns the kinds defined by the CRDs of a set, with their
// scope, and the index of the CRD defining each.
func definedKinds(set []*unstructured.Unstructured) map[schema.GroupKind]crdDefinition {
	kinds := map[schema.GroupKind]crdDefinition{}
	for _, o := range set {
		if !ssautils.IsCRD(o) {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		kinds[schema.GroupKind{Group: group, Kind: kind}] = crdDefinition{
			crd:        object.UnstructuredToObjMetadata(o),
			namespaced: scope != "Cluster",
		}
	}
	return kinds
}

// crdDefinition is a kind defined by a CRD of the set.
type crdDefinition struct {
	crd        object.ObjMetadata
	namespaced bool
}

// defaultNamespaces gives namespaced objects without a namespace the
// default one, and removes the namespace of cluster-scoped objects, so
// that inventory ids match what the API server stores. Kinds the cluster
// does not know and the set does not define are left for validation to
// report.
func defaultNamespaces(mapper meta.RESTMapper, set []*unstructured.Unstructured, crds map[schema.GroupKind]crdDefinition, namespace string) error {
	if namespace == "" {
		namespace = defaultNamespace
	}
	for _, o := range set {
		gvk := o.GroupVersionKind()
		var namespaced bool
		if def, ok := crds[gvk.GroupKind()]; ok {
			namespaced = def.namespaced
		} else {
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if meta.IsNoMatchError(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("looking up %s: %w", gvk, err)
			}
			namespaced = mapping.Scope.Name() == meta.RESTScopeNameNamespace
		}
		switch {
		case namespaced && o.GetNamespace() == "":
			o.SetNamespace(namespace)
		case !namespaced && o.GetNamespace() != "":
			o.SetNamespace("")
		}
	}
	return nil
}
