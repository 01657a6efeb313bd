package apply

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

const (
	// FieldManager is the server-side apply field manager of every object
	// uprev applies.
	FieldManager = "uprev"

	// ReconcileAnnotation set to DisabledValue, on an object in the set or
	// in the cluster, makes uprev leave the object alone: it is neither
	// created, changed nor pruned.
	ReconcileAnnotation = "uprev.dev/reconcile"
	// PruneAnnotation set to EnabledValue on a CustomResourceDefinition or a
	// Namespace in the cluster allows pruning it; set to DisabledValue on
	// any object it prevents pruning.
	PruneAnnotation = "uprev.dev/prune"
	// EnabledValue is the value that turns an annotation on.
	EnabledValue = "enabled"
	// DisabledValue is the value that turns an annotation off.
	DisabledValue = "disabled"

	// OwnerNameLabel and OwnerNamespaceLabel, set on every object Apply
	// writes, name the Owner it was applied for (Options.Owner). Prune and
	// Delete delete only objects that carry the labels of their Owner, read
	// from the cluster just before: whatever an inventory says, nothing
	// else is deleted.
	OwnerNameLabel = "sync.uprev.dev/name"
	// OwnerNamespaceLabel: see OwnerNameLabel.
	OwnerNamespaceLabel = "sync.uprev.dev/namespace"

	// ownerGroup prefixes the owner labels of the resource manager.
	ownerGroup = "uprev.dev"
	// concurrency is how many requests validation, and each ApplyAll
	// call, have in flight at once.
	concurrency = 32
	// parallelApplies is how many ApplyAll calls run at once.
	parallelApplies = 4
	// clientQPS and clientBurst lift client-go's default rate limit (5 QPS),
	// which would make a 1,000-object apply take minutes.
	clientQPS   = 1000
	clientBurst = 2000
	// definitionsTimeout bounds the wait for CRDs to be established.
	definitionsTimeout = 2 * time.Minute
	// pollInterval is how often kstatus polls while waiting.
	pollInterval = 500 * time.Millisecond
	// defaultTimeout bounds the health wait when Options.Timeout is zero.
	defaultTimeout = 5 * time.Minute
	// defaultNamespace is given to namespaced objects without a namespace.
	defaultNamespace = "default"
)

// Options tune one Apply.
type Options struct {
	// Prune deletes the objects of the previous inventory that are no
	// longer in the set. CustomResourceDefinitions and Namespaces are only
	// deleted when annotated uprev.dev/prune: enabled in the cluster.
	Prune bool
	// Owner is whose objects these are, for the labels OwnerNameLabel and
	// OwnerNamespaceLabel that Apply sets on every object it writes and
	// that Prune and Delete require before deleting anything. Required
	// for Prune and Delete.
	Owner Owner
	// Wait makes Apply wait until every object of the set is healthy
	// (kstatus Current), within Timeout.
	Wait bool
	// Timeout bounds the health wait; five minutes when zero.
	Timeout time.Duration
	// ServiceAccount, when set, is impersonated for every request, as
	// system:serviceaccount:<ServiceAccountNamespace>:<ServiceAccount>.
	ServiceAccount string
	// ServiceAccountNamespace is the namespace of ServiceAccount.
	ServiceAccountNamespace string
	// DefaultNamespace is given to namespaced objects that have none;
	// "default" when empty.
	DefaultNamespace string
	// BeforeWrite, when set, is called once the set is validated and
	// before anything is written, with every object the cluster may hold
	// of this and the previous inventory once writing starts. A caller
	// that records it before returning can prune what a crash in the
	// middle of the writes left behind. An error stops the Apply with
	// nothing written.
	BeforeWrite func(ctx context.Context, inventory []Entry) error
	// WaitCancel, when set, ends the health wait once it is done, with an
	// error wrapping ErrWaitCancelled: a new revision makes waiting on the
	// old one pointless. What was applied stays applied.
	WaitCancel context.Context
}

// ErrNoOwner is returned by Apply with Prune, and by Delete, when
// Options.Owner is not set: without it nothing can be told to be the
// caller's own, so nothing is deleted.
var ErrNoOwner = errors.New("pruning needs Options.Owner: only objects labelled as the owner's are deleted")

// ErrWaitCancelled is the cause of a health wait that Options.WaitCancel
// ended.
var ErrWaitCancelled = errors.New("health wait cancelled")

// Applier applies sets of objects to one cluster. It is safe for
// concurrent use; use one Applier per target cluster.
//
// An Applier remembers, for each identity it acts as, the resourceVersion
// of every object it applied or found unchanged, with a hash of the
// manifest. An object whose manifest and resourceVersion are the ones
// remembered has not been written to since, by anyone, so a later Apply
// reports it unchanged without a dry-run diff: a reconcile of an unchanged
// set costs a few LIST requests instead of a GET and a dry-run per object.
//
// Between Applies that is all it keeps: its clients are made for an Apply
// or Delete and dropped when the last one running ends, and the REST
// mapping they use is its API server's, shared (see Shared).
type Applier struct {
	config *rest.Config
	shared *Shared
	// mappingKey names its API server's REST mapping in shared
	// (mappingKey).
	mappingKey string
	// clock ages remembered versions.
	clock clock.PassiveClock

	mu         sync.Mutex
	identities map[string]*identity
}

// NewApplier returns an Applier for the cluster that config reaches, that
// shares nothing with other Appliers. It does not contact the cluster: an
// unreachable cluster shows as an *UnreachableError from Apply. clk ages
// the versions it remembers; nil means the wall clock.
func NewApplier(config *rest.Config, clk clock.PassiveClock) (*Applier, error) {
	return NewShared(clk).NewApplier(config)
}

// NewApplier returns an Applier for the cluster that config reaches, that
// shares its API server's REST mapping and the bound of remembered
// versions with the other Appliers of s. It does not contact the cluster:
// an unreachable cluster shows as an *UnreachableError from Apply. Close
// it when it is no longer used.
func (s *Shared) NewApplier(config *rest.Config) (*Applier, error) {
	cfg := rest.CopyConfig(config)
	cfg.QPS = clientQPS
	cfg.Burst = clientBurst
	if _, err := rest.HTTPClientFor(cfg); err != nil {
		return nil, fmt.Errorf("creating HTTP client: %w", err)
	}
	key, err := mappingKey(cfg, strconv.FormatInt(s.appliers.Add(1), 10))
	if err != nil {
		return nil, err
	}
	return &Applier{config: cfg, shared: s, mappingKey: key, clock: s.clock, identities: map[string]*identity{}}, nil
}

// Close forgets the versions a remembers, giving their share of the bound
// back to the other Appliers of its Shared. An Apply after Close works,
// diffing every object, and remembers nothing.
func (a *Applier) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ident := range a.identities {
		ident.versions.close()
	}
}

// Apply makes the cluster match objects, in this order:
//
//  1. the resourceVersions of the set's objects are listed, one
//     metadata-only LIST per kind and namespace. An object whose manifest
//     and resourceVersion are those the Applier remembers from an earlier
//     Apply (see Applier) is reported unchanged, or skipped, as it was
//     then; its resourceVersion shows nobody wrote to it since. Every
//     other object is validated with a server-side dry-run; if any fails,
//     nothing is applied and a *ValidationError lists every failure.
//     Objects whose kind is defined by a CRD of the set, or whose namespace
//     is created by the set, are validated once those are applied;
//  2. CRDs, Namespaces, ClusterRoles and classes (StorageClass, ...) that
//     differ from the cluster are applied, and CRDs waited for until
//     established;
//  3. every other object that differs is applied. Objects that match are
//     not written to, so a reconcile of an unchanged set only reads, and an
//     object edited in the cluster is changed back and reported configured;
//  4. with opts.Prune, objects of previous that left the set are deleted;
//  5. with opts.Wait, Apply waits for every object to be healthy, whether
//     it was applied or not.
//
// The caller's objects are not modified. The Result holds whatever was
// done, also when an error is returned. Its Inventory is what the caller
// stores for the next Apply: nil when nothing of the set was applied (keep
// the previous one), the set itself after a whole apply, and the union of
// the previous inventory and the set when the apply stopped half-way. Errors
// are *ValidationError, *HealthError, *UnreachableError or wrapped API
// errors.
func (a *Applier) Apply(ctx context.Context, objects []*unstructured.Unstructured, previous []Entry, opts Options) (Result, error) {
	result, err := a.apply(ctx, objects, previous, opts)
	if err != nil && isUnreachable(err) {
		var unreachable *UnreachableError
		if !errors.As(err, &unreachable) {
			err = &UnreachableError{Host: redactedHost(a.config.Host), Err: err}
		}
	}
	return result, err
}

// apply is Apply without the classification of unreachable clusters.
func (a *Applier) apply(ctx context.Context, objects []*unstructured.Unstructured, previous []Entry, opts Options) (Result, error) {
	result := Result{ChangeSet: ssa.NewChangeSet()}
	ident, release, err := a.session(opts)
	if err != nil {
		return result, err
	}
	defer release()
	rm := ident.rm

	if opts.Prune && opts.Owner.IsZero() {
		return result, ErrNoOwner
	}
	set := make([]*unstructured.Unstructured, len(objects))
	for i, o := range objects {
		set[i] = o.DeepCopy()
		if !opts.Owner.IsZero() {
			setOwnerLabels(set[i], opts.Owner)
		}
	}
	sort.Sort(ssa.SortableUnstructureds(set))
	crdScopes := definedKinds(set)
	if err := defaultNamespaces(rm.Client().RESTMapper(), set, crdScopes, opts.DefaultNamespace); err != nil {
		return result, err
	}
	hashes := make([]manifestHash, len(set))
	for i, o := range set {
		if hashes[i], err = hashManifest(o); err != nil {
			return result, err
		}
	}

	// 1. Validate what may have changed since the last Apply.
	live, err := listVersions(ctx, rm.Client(), set)
	if err != nil {
		return result, err
	}
	now := a.clock.Now()
	hits := ident.versions.unchanged(set, hashes, live, crdScopes, now)
	var diffed []*unstructured.Unstructured
	for _, o := range set {
		if _, ok := hits[object.UnstructuredToObjMetadata(o)]; !ok {
			diffed = append(diffed, o)
		}
	}
	v, err := validateSet(ctx, rm, diffed, crdScopes)
	if err != nil {
		return result, err
	}
	for _, o := range set {
		if action, ok := hits[object.UnstructuredToObjMetadata(o)]; ok {
			v.results[object.UnstructuredToObjMetadata(o)] = entryFor(o, action)
		}
	}
	// Whatever happens next, remember what this Apply found out.
	applied := &appliedVersions{}
	ctx = withAppliedVersions(ctx, applied)
	defer func() {
		ident.versions.update(set, hashes, hits, live, v.results, applied.snapshot(), previous, now)
	}()
	if len(v.failures) > 0 {
		return result, &ValidationError{Failures: v.failures}
	}
	if opts.BeforeWrite != nil && len(v.changed)+len(v.deferred) > 0 {
		if err := opts.BeforeWrite(ctx, union(previous, inventory(set))); err != nil {
			return result, fmt.Errorf("recording the inventory before writing: %w", err)
		}
	}

	applyOpts := ssa.DefaultApplyOptions()
	applyOpts.ExclusionSelector = map[string]string{ReconcileAnnotation: DisabledValue}
	applyOpts.WaitInterval = pollInterval
	applyOpts.WaitTimeout = definitionsTimeout

	var definitions, others []*unstructured.Unstructured
	for _, o := range v.changed {
		if ssautils.IsClusterDefinition(o) || ssautils.IsClassDefinition(o) {
			definitions = append(definitions, o)
		} else {
			others = append(others, o)
		}
	}

	// 2. Cluster-wide definitions, staged by ssa.
	if len(definitions) > 0 {
		cs, err := rm.ApplyAllStaged(ctx, definitions, applyOpts)
		v.record(cs)
		if err != nil {
			result.ChangeSet.Append(v.entries(set))
			result.Inventory = union(previous, inventory(set))
			return result, applyError("applying cluster-wide definitions", err)
		}
	}

	// Objects that needed the definitions are validated now, still before
	// any of them is applied.
	if len(v.deferred) > 0 {
		failures, err := dryRun(ctx, rm.Client(), v.deferred)
		if err != nil {
			return result, err
		}
		if len(failures) > 0 {
			result.ChangeSet.Append(v.entries(set))
			result.Inventory = union(previous, inventory(set))
			return result, &ValidationError{Failures: failures}
		}
		others = append(others, v.deferred...)
	}

	// 3. Everything else.
	if err := applyInParallel(ctx, rm, others, applyOpts, v); err != nil {
		result.ChangeSet.Append(v.entries(set))
		result.Inventory = union(previous, inventory(set))
		return result, applyError("applying objects", err)
	}
	result.ChangeSet.Append(v.entries(set))
	result.Inventory = inventory(set)

	// 4. Prune.
	if opts.Prune {
		pruned, err := prune(ctx, rm, previous, result.Inventory, opts.Owner)
		result.ChangeSet.Append(pruned)
		result.Inventory = stillInventoried(result.Inventory, pruned)
		if err != nil {
			return result, err
		}
	}

	// 5. Health.
	if opts.Wait {
		timeout := opts.Timeout
		if timeout <= 0 {
			timeout = defaultTimeout
		}
		waitCtx := ctx
		if opts.WaitCancel != nil {
			var cancel context.CancelCauseFunc
			waitCtx, cancel = context.WithCancelCause(ctx)
			defer cancel(nil)
			stop := context.AfterFunc(opts.WaitCancel, func() { cancel(ErrWaitCancelled) })
			defer stop()
		}
		if err := waitHealthy(waitCtx, rm, set, v.skipped(), timeout); err != nil {
			result.Health = HealthUnhealthy
			return result, err
		}
		result.Health = HealthHealthy
	}
	return result, nil
}
