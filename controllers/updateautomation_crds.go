package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/cache"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/crds"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/update"
)

// crdBundleFailedReason: the CRDs could not be read from a release artifact.
const crdBundleFailedReason = "CRDBundleFailed"

// crdBundle is one spec.crds entry with the CRDs read from the artifact its
// policy selected.
type crdBundle struct {
	spec    uprevv1.CRDBundle
	policy  update.PolicyKey
	version string
	// digest names the artifact the CRDs were read from.
	digest string
	bundle *crds.Bundle
	// result is what writing it did in the last edit.
	result crds.Result
}

// Bounds of the CRD bundles kept between runs (crdBundleCache): at most
// maxCachedCRDBundles entries, least recently used dropped first, each of
// at most maxCachedCRDBundleBytes of CRD manifests, so at most 128 MiB in
// all. A larger bundle is read again on each run that needs it.
const (
	maxCachedCRDBundles     = 32
	maxCachedCRDBundleBytes = 4 << 20
)

// readBundle is a bundle read from the artifact key names.
type readBundle struct {
	key    string
	bundle *crds.Bundle
}

// crdBundleCache keeps, per spec.crds entry of each automation (its
// slot), the last bundle read, within the bounds above.
type crdBundleCache struct {
	// mu serializes every use of lru: its ListKeys reads the map's size
	// before taking its own lock (fluxcd/pkg/cache up to v0.19.0), a data
	// race with a Set or Delete of an automation running beside.
	mu  sync.Mutex
	lru *cache.LRU[readBundle]
}

// newCRDBundleCache returns an empty cache.
func newCRDBundleCache() (*crdBundleCache, error) {
	lru, err := cache.NewLRU[readBundle](maxCachedCRDBundles)
	if err != nil {
		return nil, fmt.Errorf("creating the CRD bundle cache: %w", err)
	}
	return &crdBundleCache{lru: lru}, nil
}

// get returns the bundle of slot if it was read from the artifact key.
func (c *crdBundleCache) get(slot, key string) (*crds.Bundle, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cached, err := c.lru.Get(slot)
	if err != nil || cached.key != key {
		return nil, false
	}
	return cached.bundle, true
}

// keep makes b, read from the artifact key, slot's bundle, unless it is
// larger than maxCachedCRDBundleBytes.
func (c *crdBundleCache) keep(slot, key string, b *crds.Bundle) {
	size := 0
	for _, crd := range b.CRDs {
		size += len(crd.Manifest)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > maxCachedCRDBundleBytes {
		_ = c.lru.Delete(slot)
		return
	}
	_ = c.lru.Set(slot, readBundle{key: key, bundle: b})
}

// forget drops the bundles of the slots that start with prefix.
func (c *crdBundleCache) forget(prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slots, _ := c.lru.ListKeys()
	for _, slot := range slots {
		if strings.HasPrefix(slot, prefix) {
			_ = c.lru.Delete(slot)
		}
	}
}

// crdSource maps an entry's source to the engine's; exactly one must be set.
func crdSource(from uprevv1.CRDSource) (crds.Source, string, error) {
	var src crds.Source
	var platform string
	set := 0
	if from.Chart != nil {
		src.Chart = true
		set++
	}
	if from.Image != nil {
		src.ImagePath = from.Image.Path
		platform = from.Image.Platform
		set++
	}
	if from.Artifact != nil {
		src.ArtifactMediaType = from.Artifact.MediaType
		set++
	}
	if set != 1 {
		return src, "", errors.New("exactly one of chart, image and artifact must be set")
	}
	return src, platform, nil
}

// readCRDs reads the CRDs each spec.crds entry ships, from the artifact at
// the exact digest its policy selected. Entries whose policy is not ready or
// whose version is held are left for a later run. A refused artifact stops
// the run: a version and its CRDs move together or not at all.
func (r *UpdateAutomationReconciler) readCRDs(ctx context.Context, run *automationRun) error {
	for i, entry := range run.auto.Spec.CRDs {
		src, platform, err := crdSource(entry.From)
		if err != nil {
			return stalled(uprevv1.InvalidSpecReason, fmt.Errorf("spec.crds[%d].from: %w", i, err))
		}
		key := update.PolicyKey{Namespace: run.auto.Namespace, Name: entry.PolicyRef.Name}
		pol, ok := run.policies[key]
		if !ok || run.rules.CRDRefusal(key, nil) != nil {
			continue
		}
		slot := fmt.Sprintf("%s crds[%d]", objectID(run.front.kind, client.ObjectKeyFromObject(run.auto)), i)
		bundle, digest, err := r.bundle(ctx, slot, pol, src, platform)
		if err != nil {
			var stall *stalledError
			var retry *transientError
			if errors.As(err, &stall) || errors.As(err, &retry) {
				return err
			}
			return degraded(crdBundleFailedReason, fmt.Errorf("spec.crds[%d]: reading %s from %s: %w", i, src, pol.Status.LatestRef.String(), err))
		}
		run.crds = append(run.crds, &crdBundle{spec: entry, policy: key, version: pol.Status.LatestRef.Tag, digest: digest, bundle: bundle})
	}
	run.crdsRead = true
	return nil
}

// bundle returns the CRDs the artifact a policy selected ships, and its
// digest, read by digest with its ImageRepository's credentials. The
// repository is read again, with its access rules checked again
// (--no-cross-namespace-refs, accessFrom), and the pull goes only to its
// current image: a policy whose status still names an image the
// repository no longer points at is waited for. A digest names immutable
// content, so an entry's artifact is pulled and extracted once; later runs
// take the bundle from the entry's slot in r.bundles, which holds only the
// last one read, while the cache's bounds keep it.
func (r *UpdateAutomationReconciler) bundle(ctx context.Context, slot string, pol *imagev1.ImagePolicy, src crds.Source, platform string) (*crds.Bundle, string, error) {
	repo, err := allowedRepository(ctx, r.Client, pol, r.NoCrossNamespaceRefs)
	if err != nil {
		var partial *degradedError
		if errors.As(err, &partial) {
			return nil, "", transient(crdBundleFailedReason, err)
		}
		return nil, "", err
	}
	ref := pol.Status.LatestRef
	if ref.Name != repo.Spec.Image {
		return nil, "", transient(crdBundleFailedReason, fmt.Errorf(
			"ImagePolicy %s/%s selected %s, but its ImageRepository %s now points at %s; waiting for the policy to select from it",
			pol.Namespace, pol.Name, ref.Name, repositoryOf(pol), repo.Spec.Image))
	}
	client, err := registryClient(ctx, r.Client, r.Scanner, repo, cloudIdentity{Tokens: r.TokenCache, DefaultServiceAccount: r.DefaultServiceAccount})
	if err != nil {
		return nil, "", err
	}
	digest := ref.Digest
	if digest == "" {
		if digest, err = client.Digest(ctx, ref.Name, ref.Tag); err != nil {
			return nil, "", registryError(err)
		}
	}
	key := fmt.Sprintf("%s@%s %s %s", ref.Name, digest, src, platform)
	if b, ok := r.bundles.get(slot, key); ok {
		return b, digest, nil
	}
	var b *crds.Bundle
	err = client.ReadArtifact(ctx, ref.Name, digest, func(img v1.Image) error {
		var err error
		b, err = crds.Extract(ctx, img, src, crds.Options{MaxLayerSize: r.MaxCRDLayerSize})
		return err
	}, registry.WithPlatform(platform))
	switch {
	case errors.Is(err, registry.ErrInvalidConfig), errors.Is(err, registry.ErrUnauthorized),
		errors.Is(err, registry.ErrNotFound), errors.Is(err, registry.ErrTransient):
		return nil, "", registryError(err)
	case err != nil:
		return nil, "", err
	}
	r.bundles.keep(slot, key, b)
	return b, digest, nil
}

// writeCRDs writes the bundles into the checkout dir, except those of
// policies whose version change was refused, and returns their summaries
// for the commit message and the files written or removed.
func writeCRDs(dir string, run *automationRun, res update.Result) ([]string, []string, error) {
	var summaries, files []string
	for _, b := range run.crds {
		if run.rules.CRDRefusal(b.policy, res.Refused) != nil {
			b.result = crds.Result{}
			continue
		}
		previous := ""
		if observed, ok := run.auto.Status.ObservedPolicies[b.policy.Name]; ok {
			previous = observed.Tag
		}
		for _, c := range res.Changes {
			if c.Policy == b.policy && c.Old.Tag != "" {
				previous = c.Old.Tag
			}
		}
		result, err := crds.Write(dir, b.spec.Path, b.bundle, crds.WriteOptions{Prune: b.spec.Prune, Version: b.version, PreviousVersion: previous})
		if err != nil {
			if errors.Is(err, crds.ErrPathEscapesRoot) {
				return nil, nil, stalled(uprevv1.InvalidSpecReason, fmt.Errorf("spec.crds path %q: %w", b.spec.Path, err))
			}
			return nil, nil, fmt.Errorf("writing the CRDs of %s: %w", b.policy, err)
		}
		b.result = result
		if result.Changed() {
			summaries = append(summaries, result.Summary())
			files = append(files, crdFiles(result)...)
		}
	}
	return summaries, files, nil
}

// crdFiles returns the files a Write that changed something wrote or
// removed.
func crdFiles(result crds.Result) []string {
	var files []string
	for _, changes := range [][]crds.Change{result.Added, result.Updated} {
		for _, c := range changes {
			files = append(files, c.File)
		}
	}
	if result.Pruned {
		for _, c := range result.Removed {
			files = append(files, c.File)
		}
	}
	return files
}

// crdStatus reports the bundles of a run in status.
func crdStatus(run *automationRun) []uprevv1.CRDBundleStatus {
	var out []uprevv1.CRDBundleStatus
	for _, b := range run.crds {
		st := uprevv1.CRDBundleStatus{
			Policy:  b.policy.String(),
			Path:    b.spec.Path,
			Version: b.version,
			Digest:  b.digest,
			CRDs:    len(b.bundle.CRDs),
			Ignored: b.bundle.Ignored,
		}
		if !b.result.Pruned {
			for _, c := range b.result.Removed {
				st.Removed = append(st.Removed, c.Name)
			}
		}
		out = append(out, st)
	}
	return out
}
