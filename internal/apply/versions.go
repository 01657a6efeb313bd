package apply

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// reverifyAfter is how long a remembered resourceVersion spares an
	// object the dry-run diff. After that the object is diffed again even
	// if nobody wrote to it, which catches what a resourceVersion cannot
	// show: a CRD schema or an admission webhook changed outside the set.
	reverifyAfter = time.Hour
	// maxRemembered bounds the objects remembered per identity. When an
	// apply would exceed it, the objects of other sets are forgotten (they
	// are diffed in full on their next apply).
	maxRemembered = 50_000
)

// manifestHash identifies the content of a desired object.
type manifestHash [sha256.Size]byte

// hashManifest returns the hash of o's content; encoding/json writes map
// keys in order, so equal objects hash alike.
func hashManifest(o *unstructured.Unstructured) (manifestHash, error) {
	data, err := json.Marshal(o.Object)
	if err != nil {
		return manifestHash{}, fmt.Errorf("hashing %s: %w", ssautils.FmtUnstructured(o), err)
	}
	return sha256.Sum256(data), nil
}

// verified says that the cluster's copy of an object, at resourceVersion
// version, is what applying the manifest with the given hash makes of it:
// either uprev's apply returned that version, or a dry-run diff made after
// the version was listed found nothing to change. The statement stays true
// for as long as the object keeps that resourceVersion, since any write to
// the object changes it.
type verified struct {
	hash    manifestHash
	version string
	// action is what the dry-run diff said: ssa.UnchangedAction, or
	// ssa.SkippedAction for objects annotated ReconcileAnnotation.
	action ssa.Action
	// at is when the statement was established; after reverifyAfter the
	// object is diffed again.
	at time.Time
}

// versionCache remembers the verified objects of one identity on one
// cluster. A verified entry is never wrong, only possibly out of date, so
// concurrent applies may update it in any order.
type versionCache struct {
	// budget is shared with the other caches of a Shared; the cache holds
	// len(objects) of it.
	budget *budget

	mu      sync.Mutex
	objects map[object.ObjMetadata]verified
	// closed caches remember nothing.
	closed bool
}

// newVersionCache returns an empty cache counted against b.
func newVersionCache(b *budget) *versionCache {
	return &versionCache{budget: b, objects: map[object.ObjMetadata]verified{}}
}

// close forgets every object and remembers none from now on.
func (c *versionCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.budget.resize(len(c.objects), 0)
	c.objects, c.closed = map[object.ObjMetadata]verified{}, true
}

// unchanged returns, for each object of set, whether it can be reported
// with its remembered action without a dry-run: its manifest is the one
// verified, its live resourceVersion (from live) is the one verified, and
// the verification is younger than reverifyAfter. Objects of a kind whose
// CRD is in the set are diffed whenever their CRD is, as a changed schema
// may change them.
func (c *versionCache) unchanged(set []*unstructured.Unstructured, hashes []manifestHash, live map[object.ObjMetadata]string, crds map[schema.GroupKind]crdDefinition, now time.Time) map[object.ObjMetadata]ssa.Action {
	c.mu.Lock()
	defer c.mu.Unlock()
	hits := map[object.ObjMetadata]ssa.Action{}
	for i, o := range set {
		id := object.UnstructuredToObjMetadata(o)
		v, ok := c.objects[id]
		version, listed := live[id]
		if ok && listed && v.hash == hashes[i] && v.version == version && now.Sub(v.at) < reverifyAfter {
			hits[id] = v.action
		}
	}
	for _, o := range set {
		id := object.UnstructuredToObjMetadata(o)
		if def, ok := crds[id.GroupKind]; ok {
			if _, fresh := hits[def.crd]; !fresh {
				delete(hits, id)
			}
		}
	}
	return hits
}

// update records what an apply of set established, and forgets what it
// made out of date: objects of set that were diffed or applied without a
// verified outcome, and objects of previous that left the set. hits are
// the objects that unchanged let through, which keep their entry; results
// holds the outcome of each object of set, applied the resourceVersions
// that uprev's own applies returned, and live the resourceVersions listed
// before any object was diffed.
func (c *versionCache) update(set []*unstructured.Unstructured, hashes []manifestHash, hits map[object.ObjMetadata]ssa.Action, live map[object.ObjMetadata]string, results map[object.ObjMetadata]ssa.ChangeSetEntry, applied map[object.ObjMetadata]string, previous []Entry, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[object.ObjMetadata]verified, len(set))
	for i, o := range set {
		id := object.UnstructuredToObjMetadata(o)
		if _, ok := hits[id]; ok {
			if old, ok := c.objects[id]; ok {
				next[id] = old
			}
			continue
		}
		if version, ok := applied[id]; ok && version != "" {
			next[id] = verified{hash: hashes[i], version: version, action: ssa.UnchangedAction, at: now}
			continue
		}
		e, ok := results[id]
		if !ok || e.Action != ssa.UnchangedAction && e.Action != ssa.SkippedAction {
			continue
		}
		if version, ok := live[id]; ok {
			next[id] = verified{hash: hashes[i], version: version, action: e.Action, at: now}
		}
	}

	if c.closed {
		return
	}
	held := len(c.objects)
	for _, o := range set {
		delete(c.objects, object.UnstructuredToObjMetadata(o))
	}
	for _, e := range previous {
		if id, err := object.ParseObjMetadata(e.ID); err == nil {
			delete(c.objects, id)
		}
	}
	want := len(c.objects) + len(next)
	if want > maxRemembered {
		c.objects = make(map[object.ObjMetadata]verified, len(next))
		want = len(next)
	}
	granted := c.budget.resize(held, want)
	if granted < want {
		// Past the bound of all caches, this set's objects are kept
		// rather than those of other sets, as many as fit.
		c.objects = make(map[object.ObjMetadata]verified, min(granted, len(next)))
	}
	for id, v := range next {
		if len(c.objects) >= granted {
			break
		}
		c.objects[id] = v
	}
	c.budget.resize(granted, len(c.objects))
}

// listVersions lists the resourceVersions of the objects of set, with one
// metadata-only LIST per kind and namespace. Kinds the cluster does not
// serve yet, and lists the identity may not make, are left out: their
// objects are then diffed in full. It returns an error only when the
// cluster cannot be reached.
func listVersions(ctx context.Context, c client.Client, set []*unstructured.Unstructured) (map[object.ObjMetadata]string, error) {
	type group struct {
		gvk       schema.GroupVersionKind
		namespace string
	}
	wanted := map[group]map[string]bool{}
	for _, o := range set {
		k := group{gvk: o.GroupVersionKind(), namespace: o.GetNamespace()}
		if wanted[k] == nil {
			wanted[k] = map[string]bool{}
		}
		wanted[k][o.GetName()] = true
	}

	var mu sync.Mutex
	live := make(map[object.ObjMetadata]string, len(set))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for k, names := range wanted {
		g.Go(func() error {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
			err := c.List(gctx, list, client.InNamespace(k.namespace))
			if err != nil {
				if isUnreachable(err) {
					return err
				}
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			for _, item := range list.Items {
				if names[item.Name] && item.Namespace == k.namespace {
					id := object.ObjMetadata{Namespace: item.Namespace, Name: item.Name, GroupKind: k.gvk.GroupKind()}
					live[id] = item.ResourceVersion
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return live, nil
}

// appliedVersions collects the resourceVersions that uprev's own
// server-side applies return during one Apply.
type appliedVersions struct {
	mu       sync.Mutex
	versions map[object.ObjMetadata]string
}

// appliedVersionsKey is the context key of an Apply's *appliedVersions.
type appliedVersionsKey struct{}

// withAppliedVersions returns a context in which the applies made through
// a resource manager's client are recorded in av.
func withAppliedVersions(ctx context.Context, av *appliedVersions) context.Context {
	return context.WithValue(ctx, appliedVersionsKey{}, av)
}

// snapshot returns the versions recorded so far.
func (av *appliedVersions) snapshot() map[object.ObjMetadata]string {
	av.mu.Lock()
	defer av.mu.Unlock()
	out := make(map[object.ObjMetadata]string, len(av.versions))
	for id, v := range av.versions {
		out[id] = v
	}
	return out
}

// recordApply is a client Patch that, once a server-side apply that is not
// a dry-run succeeds, records the resourceVersion the API server returned
// in the context's *appliedVersions. ssa applies through its client and
// does not return the applied object, so this is where the version that
// uprev's own write produced can be seen.
func recordApply(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	av, ok := ctx.Value(appliedVersionsKey{}).(*appliedVersions)
	if !ok || patch.Type() != types.ApplyPatchType {
		return nil
	}
	if po := (&client.PatchOptions{}).ApplyOptions(opts); len(po.DryRun) > 0 {
		return nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	av.mu.Lock()
	defer av.mu.Unlock()
	if av.versions == nil {
		av.versions = map[object.ObjMetadata]string{}
	}
	av.versions[object.UnstructuredToObjMetadata(u)] = u.GetResourceVersion()
	return nil
}
