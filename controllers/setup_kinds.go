package controllers

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"

	fluxcache "github.com/fluxcd/pkg/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/source"
	"github.com/uprev-dev/uprev/internal/update"
)

// kinds adds the controllers of one manager (Setup): what they share is
// made once, by the first controller that needs it.
type kinds struct {
	mgr       ctrl.Manager
	opts      Options
	copts     controller.Options
	recorders func(events.EventRecorder) events.EventRecorder

	scanner *registry.Scanner
	tokens  *fluxcache.TokenCache
	clones  *gitrepo.Cache
	pushes  *gitPushEvents
}

// runs tells whether the manager runs the controller name.
func (k *kinds) runs(name string) bool { return slices.Contains(k.opts.Controllers, name) }

// add sets up one kind's reconciler with setup, then gives it the
// manager's event recorder (eventRecorders).
func (k *kinds) add(kind string, r *reconciler, setup func() error) error {
	if err := setup(); err != nil {
		return fmt.Errorf("setting up %s controller: %w", kind, err)
	}
	r.Events = k.recorders(r.Events)
	r.minInterval = k.opts.MinInterval
	return nil
}

// newScanner makes the registry scanner, with its metrics.
func (k *kinds) newScanner() error {
	metrics := registry.NewMetrics()
	if err := metrics.Register(crmetrics.Registry); err != nil {
		return fmt.Errorf("registering registry metrics: %w", err)
	}
	k.opts.Registry.Metrics = metrics
	k.scanner = registry.NewScanner(k.opts.Registry)
	return nil
}

// newTokenCache makes the cache of short-lived tokens; nil when flags turn
// it off.
func newTokenCache(flags fluxcache.TokenFlags) (*fluxcache.TokenCache, error) {
	if flags.MaxSize <= 0 {
		return nil, nil
	}
	tokens, err := fluxcache.NewTokenCache(flags.MaxSize,
		fluxcache.WithMaxDuration(flags.MaxDuration),
		fluxcache.WithMetricsRegisterer(crmetrics.Registry),
		fluxcache.WithMetricsPrefix("uprev_token_"))
	if err != nil {
		return nil, fmt.Errorf("creating the token cache: %w", err)
	}
	return tokens, nil
}

// addImageScanning adds ImageRepository, ImagePolicy, ReleaseGate and
// ReleaseSource.
func (k *kinds) addImageScanning(ctx context.Context) error {
	opts := k.opts
	tags := registry.Store{Dir: filepath.Join(opts.StoragePath, "tags"), Clock: opts.Clock}
	tagCount := NewTagCountMetric()
	if err := crmetrics.Registry.Register(tagCount); err != nil {
		return fmt.Errorf("registering tag metrics: %w", err)
	}
	repos := &ImageRepositoryReconciler{Scanner: k.scanner, TokenCache: k.tokens, DefaultServiceAccount: opts.DefaultServiceAccount, Tags: tags, TagCount: tagCount, Clock: opts.Clock}
	policies := &ImagePolicyReconciler{Scanner: k.scanner, TokenCache: k.tokens, DefaultServiceAccount: opts.DefaultServiceAccount,
		Tags: tags, NoCrossNamespaceRefs: opts.ACL.NoCrossNamespaceRefs, Clock: opts.Clock}
	gates := &ReleaseGateReconciler{Policies: policies, Clock: opts.Clock}
	sources := &ReleaseSourceReconciler{Clock: opts.Clock, TokenCache: k.tokens,
		Sources: source.NewClient(source.Options{DenyCIDRs: opts.DenyCIDRs, UserAgent: opts.Registry.UserAgent, Clock: opts.Clock})}
	for _, add := range []func() error{
		func() error {
			return k.add("ImageRepository", &repos.reconciler, func() error { return repos.SetupWithManager(k.mgr, k.copts) })
		},
		func() error {
			return k.add("ImagePolicy", &policies.reconciler, func() error { return policies.SetupWithManager(ctx, k.mgr, k.copts) })
		},
		func() error {
			return k.add("ReleaseGate", &gates.reconciler, func() error { return gates.SetupWithManager(k.mgr, k.copts) })
		},
		func() error {
			return k.add("ReleaseSource", &sources.reconciler, func() error { return sources.SetupWithManager(k.mgr, k.copts) })
		},
	} {
		if err := add(); err != nil {
			return err
		}
	}
	return nil
}

// addClones makes the kept clones of the Git repositories, shared by the
// automations and the Syncs; the cache sweeps the clones that no live
// object uses.
func (k *kinds) addClones(context.Context) error {
	if k.clones != nil {
		return nil
	}
	clones, err := gitrepo.NewCacheWithOptions(filepath.Join(k.opts.StoragePath, "git"), gitrepo.CacheOptions{Log: ctrl.Log.WithName("git-clones")})
	if err != nil {
		return err
	}
	if err := k.mgr.Add(clones); err != nil {
		return fmt.Errorf("adding the clone cache: %w", err)
	}
	k.clones = clones
	return nil
}

// addPushEvents makes what tells the Syncs of a branch of every push.
func (k *kinds) addPushEvents(ctx context.Context) error {
	var err error
	k.pushes, err = newGitPushEvents(ctx, k.mgr)
	return err
}

// markerScanCacheSize is how many marked file contents the write-back
// engine keeps the scans of, for all automations: a few KB each at most.
const markerScanCacheSize = 20000

// addWriteBack adds UpdateAutomation and Flux's ImageUpdateAutomation,
// which share the write-back engine.
func (k *kinds) addWriteBack(context.Context) error {
	opts := k.opts
	automations := &UpdateAutomationReconciler{Clones: k.clones, Scanner: k.scanner, TokenCache: k.tokens, Forges: opts.DenyCIDRs.Client(forgeTimeout),
		Notes:           notes.NewFetcher(opts.DenyCIDRs.Client(forgeTimeout), opts.Clock),
		GitHubReleases:  cmp.Or(notes.API{URL: opts.GitHubReleasesAPI}, notes.GitHubAPI),
		Sources:         source.NewClient(source.Options{DenyCIDRs: opts.DenyCIDRs, UserAgent: opts.Registry.UserAgent, Clock: opts.Clock}),
		Tags:            &registry.Store{Dir: filepath.Join(opts.StoragePath, "tags"), Clock: opts.Clock},
		MaxCRDLayerSize: opts.MaxCRDLayerSize, pushes: k.pushes, Clock: opts.Clock, DefaultServiceAccount: opts.DefaultServiceAccount, NoCrossNamespaceRefs: opts.ACL.NoCrossNamespaceRefs,
		Scans: update.NewScanCache(markerScanCacheSize)}
	if err := k.add("UpdateAutomation", &automations.reconciler, func() error { return automations.SetupWithManager(k.mgr, k.copts) }); err != nil {
		return err
	}
	fluxAutomations := &ImageUpdateAutomationReconciler{Engine: automations, NoCrossNamespaceRefs: opts.ACL.NoCrossNamespaceRefs}
	return k.add("ImageUpdateAutomation", &fluxAutomations.reconciler, func() error { return fluxAutomations.SetupWithManager(k.mgr, k.copts) })
}

// addApply adds Sync, with its target component metric.
func (k *kinds) addApply(context.Context) error {
	opts := k.opts
	componentInfo := NewTargetComponentMetric()
	if err := crmetrics.Registry.Register(componentInfo); err != nil {
		return fmt.Errorf("registering target component metrics: %w", err)
	}
	syncs := &SyncReconciler{Clones: k.clones, KubeConfig: opts.KubeConfig, DefaultServiceAccount: opts.DefaultServiceAccount,
		ComponentInfo: componentInfo, TokenCache: k.tokens, pushes: k.pushes, Clock: opts.Clock}
	return k.add("Sync", &syncs.reconciler, func() error { return syncs.SetupWithManager(k.mgr, k.copts) })
}
