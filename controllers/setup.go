package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	fluxcache "github.com/fluxcd/pkg/cache"
	"github.com/fluxcd/pkg/runtime/acl"
	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/notify"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/webhook"
)

// Names of the controllers a manager can run.
const (
	// ImageScanning runs ImageRepository, ImagePolicy, ReleaseGate and
	// ReleaseSource.
	ImageScanning = "image"
	// WriteBack runs UpdateAutomation and Flux's ImageUpdateAutomation.
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
	// MinInterval is the shortest time between two runs of an object
	// that it asks for (--min-interval): an object whose spec.interval is
	// shorter runs again at most once per MinInterval (atLeastMinInterval);
	// 0 means no floor.
	MinInterval time.Duration
	// DenyCIDRs are the address ranges no call to a host an object names
	// may go to (--registry-deny-cidrs): registries, release sources and
	// forges are given it here; Git and the libraries that take no client
	// of ours have it from outbound.Install.
	DenyCIDRs outbound.Denylist
	// Registry configures registry access (per-host limits, retries); its
	// DenyCIDRs are Options.DenyCIDRs.
	Registry registry.ScannerOptions
	// MaxCRDLayerSize bounds an artifact layer read for CRD bundles; 0
	// means 100 MiB.
	MaxCRDLayerSize int64
	// GitHubReleasesAPI is the API that serves the releases of sources on
	// github.com for pull requests' release notes: GitHub's public API
	// when empty; a mirror, or a test's stand-in.
	GitHubReleasesAPI string
	// Webhook configures the webhook receivers; they run when Addr is set.
	Webhook webhook.Options
	// KubeConfig says what the kubeconfigs of Sync targets may use.
	KubeConfig runtimeclient.KubeConfigOptions
	// DefaultServiceAccount is impersonated by Syncs that apply to the
	// local cluster without a serviceAccountName, and is the cloud
	// identity of ImageRepositories with a cloud provider and no
	// serviceAccountName (object-level workload identity, as in Flux);
	// empty means the manager's own identity.
	DefaultServiceAccount string
	// ACL turns off references across namespaces.
	ACL acl.Options
	// TokenCache sizes the cache of short-lived tokens: cloud registry
	// tokens (spec.provider aws, azure, gcp) and GitHub App installation
	// tokens; a MaxSize of 0 turns it off.
	TokenCache fluxcache.TokenFlags
	// EventsAddr is notification-controller's address; every event is
	// also posted there, in Flux's format, when it is set.
	EventsAddr string
	// Clock tells when scans first see tags, when Sync targets became
	// healthy and when release gates let versions through; the wall clock
	// when nil.
	Clock clock.PassiveClock
}

// eventRecorders returns what makes a controller's event recorder: with an
// events address, one that also forwards every event to
// notification-controller (internal/notify), whose worker runs with mgr.
// Every recorder bounds its notes (boundedRecorder).
func eventRecorders(mgr ctrl.Manager, addr string) (func(events.EventRecorder) events.EventRecorder, error) {
	if addr == "" {
		return func(r events.EventRecorder) events.EventRecorder { return boundedRecorder{r} }, nil
	}
	forwarder, err := notify.New(addr, "uprev", mgr.GetScheme(), eventMetadata, ctrl.Log.WithName("events"))
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(forwarder); err != nil {
		return nil, fmt.Errorf("adding the event forwarder: %w", err)
	}
	return func(r events.EventRecorder) events.EventRecorder { return boundedRecorder{forwarder.Wrap(r)} }, nil
}

// maxEventNote is the longest note the API server accepts on an event
// (events.k8s.io/v1 validation); a longer one is refused and the event lost.
const maxEventNote = 1024

// boundedRecorder cuts every note to maxEventNote bytes, saying how much
// was left out, so that an event carrying an aggregated error (of many
// Sync targets, say) is recorded rather than refused.
type boundedRecorder struct {
	events.EventRecorder
}

// Eventf records the event with its note cut to maxEventNote bytes.
func (b boundedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", cutMessage(fmt.Sprintf(note, args...), maxEventNote))
}

// cutMessage returns msg, or, when it is longer than limit bytes, its
// longest prefix that, cut at a character boundary and followed by how
// many bytes were left out, fits limit bytes.
func cutMessage(msg string, limit int) string {
	if len(msg) <= limit {
		return msg
	}
	// The suffix is at most this long for any message under 1 GB.
	const room = len(" … (999999999 more bytes)")
	cut := max(0, limit-room)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s … (%d more bytes)", msg[:cut], len(msg)-cut)
}

// ManagerOptions returns the options that decide what uprev's manager
// reads and how: scheme, the cache (managerCache, with shard as Flux's
// --watch-label-selector) and the client (clientOptions). The uprev
// binary adds its listeners and leader election to them; a test suite
// that runs the controllers in process takes them as they are, so that
// its controllers read what the product's read, from where they read it.
func ManagerOptions(scheme *runtime.Scheme, shard labels.Selector, webhookSecretName string) ctrl.Options {
	return ctrl.Options{Scheme: scheme, Cache: managerCache(shard, webhookSecretName), Client: clientOptions()}
}

// shardCache returns the cache options of a manager that reconciles only
// the objects selector matches: Flux's --watch-label-selector, with its
// convention of a `sharding.fluxcd.io/key` label. The seven kinds uprev
// reconciles are filtered on the apiserver's side, so each shard lists and
// watches its own objects only; what they read (Secrets, and in workload
// clusters anything) is not. An object and those it refers to
// (ImagePolicy and ImageRepository, UpdateAutomation and its policies,
// ReleaseGate and its policies) must carry the same shard label, as in
// Flux.
func shardCache(selector labels.Selector) cache.Options {
	if selector.Empty() {
		return cache.Options{}
	}
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range reconciledKinds() {
		byObject[obj] = cache.ByObject{Label: selector}
	}
	return cache.Options{ByObject: byObject}
}

// reconciledKinds returns an empty object of each kind the manager
// reconciles.
func reconciledKinds() []client.Object {
	return []client.Object{&imagev1.ImageRepository{}, &imagev1.ImagePolicy{}, &uprevv1.UpdateAutomation{}, &iacv1.ImageUpdateAutomation{},
		&uprevv1.Sync{}, &uprevv1.ReleaseGate{}, &uprevv1.ReleaseSource{}}
}

// managerCache returns the cache options of the manager: shardCache's,
// and Secrets filtered to the webhook receivers' Secret name, the only
// Secrets read from the cache (by the receivers, so that a flood of
// notifications does not become a flood of API requests). Every other
// Secret is read from the API server when needed (clientOptions), so the
// manager's memory does not grow with the Secrets of the cluster. Objects
// are kept without their managed fields, which uprev never reads and
// which are often most of a small object: less to keep, copy on every read
// and marshal for every status patch.
func managerCache(selector labels.Selector, webhookSecretName string) cache.Options {
	opts := shardCache(selector)
	opts.DefaultTransform = cache.TransformStripManagedFields()
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	if webhookSecretName == "" {
		webhookSecretName = webhook.DefaultSecretName
	}
	opts.ByObject[&corev1.Secret{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", webhookSecretName)}
	return opts
}

// clientOptions returns the options of the manager's client: Secrets and
// ServiceAccounts, which any tenant may create by the thousand, are read
// from the API server, not from a cluster-wide cache. uprev reads only the
// few its objects name, once per run, and watches none. SyncTargets too
// are read from the API server, listed by Sync once per run: pruning must
// never read an inventory older than the last one written, a promotion gate
// run by a Sync's change must read the records the Sync wrote before it,
// and the manager need not hold every target's inventory in memory.
func clientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ServiceAccount{}, &uprevv1.SyncTarget{}}}}
}

// NewScheme returns a scheme with every kind uprev reads or writes.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, imagev1.AddToScheme, iacv1.AddToScheme, sourcev1.AddToScheme, uprevv1.AddToScheme} {
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
	opts.Registry.DenyCIDRs = opts.DenyCIDRs
	recorders, err := eventRecorders(mgr, opts.EventsAddr)
	if err != nil {
		return err
	}
	k := kinds{mgr: mgr, opts: opts, copts: controller.Options{MaxConcurrentReconciles: max(1, opts.Concurrency)}, recorders: recorders}
	if k.runs(ImageScanning) || k.runs(WriteBack) {
		if err := k.newScanner(); err != nil {
			return err
		}
	}
	if k.tokens, err = newTokenCache(opts.TokenCache); err != nil {
		return err
	}
	for _, step := range []struct {
		controller string
		add        func(context.Context) error
	}{
		{ImageScanning, k.addImageScanning},
		{WriteBack, k.addClones},
		{Apply, k.addClones},
		{Apply, k.addPushEvents},
		{WriteBack, k.addWriteBack},
		{Apply, k.addApply},
	} {
		if k.runs(step.controller) {
			if err := step.add(ctx); err != nil {
				return err
			}
		}
	}
	if opts.Webhook.Addr != "" {
		receiver := &webhook.Receiver{Options: opts.Webhook, Client: mgr.GetClient(), Secrets: mgr.GetCache()}
		if err := mgr.Add(receiver); err != nil {
			return fmt.Errorf("adding the webhook receivers: %w", err)
		}
	}
	return nil
}
