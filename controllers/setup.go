package controllers

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/acl"
	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/webhook"
)

// Names of the controllers a manager can run.
const (
	// ImageScanning runs ImageRepository and ImagePolicy.
	ImageScanning = "image"
	// WriteBack runs UpdateAutomation.
	WriteBack = "automation"
	// Apply runs Sync.
	Apply = "sync"
)

// AllControllers lists every controller, the default.
var AllControllers = []string{ImageScanning, WriteBack, Apply}

// Options configure the controllers of one manager.
type Options struct {
	// Controllers to run; see AllControllers.
	Controllers []string
	// StoragePath holds the tag store and the kept Git clones.
	StoragePath string
	// Concurrency is the number of objects of one kind reconciled at once.
	Concurrency int
	// Registry configures registry access (per-host limits, retries).
	Registry registry.ScannerOptions
	// MaxCRDLayerSize bounds an artifact layer read for CRD bundles; 0
	// means 100 MiB.
	MaxCRDLayerSize int64
	// Webhook configures the webhook receivers; they run when Addr is set.
	Webhook webhook.Options
	// KubeConfig says what the kubeconfigs of Sync targets may use.
	KubeConfig runtimeclient.KubeConfigOptions
	// DefaultServiceAccount is impersonated by Syncs that apply to the
	// local cluster without a serviceAccountName; empty means the
	// manager's own identity.
	DefaultServiceAccount string
	// ACL turns off references across namespaces.
	ACL acl.Options
}

// NewScheme returns a scheme with every kind uprev reads or writes.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, imagev1.AddToScheme, uprevv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	return s, nil
}

// Setup adds the chosen controllers to mgr and registers their metrics.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	for _, name := range opts.Controllers {
		if !slices.Contains(AllControllers, name) {
			return fmt.Errorf("unknown controller %q (want some of %v)", name, AllControllers)
		}
	}
	copts := controller.Options{MaxConcurrentReconciles: max(1, opts.Concurrency)}
	var scanner *registry.Scanner
	if slices.Contains(opts.Controllers, ImageScanning) || slices.Contains(opts.Controllers, WriteBack) {
		metrics := registry.NewMetrics()
		if err := metrics.Register(crmetrics.Registry); err != nil {
			return fmt.Errorf("registering registry metrics: %w", err)
		}
		opts.Registry.Metrics = metrics
		scanner = registry.NewScanner(opts.Registry)
	}
	if slices.Contains(opts.Controllers, ImageScanning) {
		tags := registry.Store{Dir: filepath.Join(opts.StoragePath, "tags")}
		tagCount := NewTagCountMetric()
		if err := crmetrics.Registry.Register(tagCount); err != nil {
			return fmt.Errorf("registering tag metrics: %w", err)
		}
		repos := &ImageRepositoryReconciler{Scanner: scanner, Tags: tags, TagCount: tagCount}
		if err := repos.SetupWithManager(mgr, copts); err != nil {
			return fmt.Errorf("setting up ImageRepository controller: %w", err)
		}
		policies := &ImagePolicyReconciler{Scanner: scanner, Tags: tags, NoCrossNamespaceRefs: opts.ACL.NoCrossNamespaceRefs}
		if err := policies.SetupWithManager(ctx, mgr, copts); err != nil {
			return fmt.Errorf("setting up ImagePolicy controller: %w", err)
		}
	}
	var clones *gitrepo.Cache
	if slices.Contains(opts.Controllers, WriteBack) || slices.Contains(opts.Controllers, Apply) {
		var err error
		clones, err = gitrepo.NewCacheWithOptions(filepath.Join(opts.StoragePath, "git"), gitrepo.CacheOptions{Log: ctrl.Log.WithName("git-clones")})
		if err != nil {
			return err
		}
		// The cache sweeps the clones that no live object uses.
		if err := mgr.Add(clones); err != nil {
			return fmt.Errorf("adding the clone cache: %w", err)
		}
	}
	var pushes *gitPushEvents
	if slices.Contains(opts.Controllers, Apply) {
		var err error
		if pushes, err = newGitPushEvents(ctx, mgr); err != nil {
			return err
		}
	}
	if slices.Contains(opts.Controllers, WriteBack) {
		automations := &UpdateAutomationReconciler{Clones: clones, Scanner: scanner, MaxCRDLayerSize: opts.MaxCRDLayerSize, pushes: pushes}
		if err := automations.SetupWithManager(mgr, copts); err != nil {
			return fmt.Errorf("setting up UpdateAutomation controller: %w", err)
		}
	}
	if slices.Contains(opts.Controllers, Apply) {
		syncs := &SyncReconciler{Clones: clones, KubeConfig: opts.KubeConfig, DefaultServiceAccount: opts.DefaultServiceAccount, pushes: pushes}
		if err := syncs.SetupWithManager(mgr, copts); err != nil {
			return fmt.Errorf("setting up Sync controller: %w", err)
		}
	}
	if opts.Webhook.Addr != "" {
		receiver := &webhook.Receiver{Options: opts.Webhook, Client: mgr.GetClient(), Secrets: mgr.GetClient()}
		if err := mgr.Add(receiver); err != nil {
			return fmt.Errorf("adding the webhook receivers: %w", err)
		}
	}
	return nil
}
