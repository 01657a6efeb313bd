package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/auth"
	"github.com/fluxcd/pkg/runtime/client"
	fluxcontroller "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/features"
	"github.com/fluxcd/pkg/runtime/jitter"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	"github.com/fluxcd/pkg/runtime/logger"
	"github.com/fluxcd/pkg/runtime/probes"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/version"
	"github.com/uprev-dev/uprev/internal/webhook"
)

// runLong is the help of `uprev run`.
const runLong = `Runs uprev's controllers until the process is signalled to stop: image
scanning (ImageRepository, ImagePolicy), write-back (UpdateAutomation) and
apply (Sync). --controllers picks a subset, so the apply loop can run alone in
each workload cluster.

The bare binary, 'uprev [flags]', does the same with the same flags.`

// managerOptions are the flags of the manager.
type managerOptions struct {
	clientOpts    client.Options
	leaderOpts    leaderelection.Options
	logOpts       logger.Options
	jitterOpts    jitter.IntervalOptions
	featureGates  features.FeatureGates
	metricsAddr   string
	metricsSecure bool
	metricsCerts  string
	probeAddr     string
	pprofAddr     string
	leaderNS      string
	watchSelector string
	enabled       string
	opts          controllers.Options
	registryRate  float64
	registryConns int
	registryDeny  []string
	kubeconfig    string
	kubeContext   string
}

// newRunCommand returns `uprev run`.
func newRunCommand() *cobra.Command {
	var o managerOptions
	cmd := &cobra.Command{
		Use:     "run [flags]",
		Short:   "Run the manager (the default without a command)",
		Long:    runLong,
		GroupID: groupManager,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context())
		},
	}
	o.bindFlags(cmd.Flags())
	return cmd
}

// bindFlags adds the manager's flags to fs.
func (o *managerOptions) bindFlags(fs *pflag.FlagSet) {
	o.clientOpts.BindFlags(fs)
	o.opts.KubeConfig.BindFlags(fs)
	o.opts.ACL.BindFlags(fs)
	o.leaderOpts.BindFlags(fs)
	o.logOpts.BindFlags(fs)
	o.jitterOpts.BindFlags(fs)
	o.featureGates.BindFlags(fs)
	o.opts.TokenCache.BindFlags(fs, 100)
	fs.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "The address the Prometheus metrics endpoint binds to; 0 turns it off.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"Serve the metrics over HTTPS, only to clients the API server authenticates (TokenReview) and authorizes for GET on the /metrics non-resource URL (SubjectAccessReview); false serves them over plain HTTP to anyone who reaches the port.")
	fs.StringVar(&o.metricsCerts, "metrics-cert-dir", "",
		"The directory with the metrics server's tls.crt and tls.key (reloaded when they change); empty means a self-signed certificate made at start. Only with --metrics-secure.")
	fs.StringVar(&o.probeAddr, "health-addr", ":9440", "The address the health and readiness probes bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-addr", "",
		"The address Go's profiles (/debug/pprof/) are served on, over plain HTTP to anyone who reaches it, such as 127.0.0.1:6060 for a port-forward; empty turns them off.")
	fs.StringVar(&o.opts.EventsAddr, "events-addr", "",
		"The address of Flux's notification-controller; every event is also posted there, in Flux's event format. Empty turns it off.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "The kubeconfig of the cluster to run against; empty means $KUBECONFIG, the Pod's ServiceAccount, then ~/.kube/config.")
	fs.StringVar(&o.kubeContext, "context", "", "The kubeconfig context to use; default: its current context.")
	fs.StringVar(&o.watchSelector, "watch-label-selector", "",
		"Reconcile only the objects with matching labels (ImageRepositories, ImagePolicies, UpdateAutomations, ImageUpdateAutomations, Syncs, ReleaseGates and ReleaseSources), e.g. 'sharding.fluxcd.io/key=shard1'; the leader election lease is then per selector.")
	fs.StringVar(&o.leaderNS, "leader-election-namespace", "",
		"The namespace of the leader election Lease; empty means the namespace of the manager's Pod. Needed to elect a leader outside a cluster.")
	fs.StringVar(&o.enabled, "controllers", strings.Join(controllers.AllControllers, ","),
		"Comma-separated controllers to run: image (ImageRepository, ImagePolicy), automation (UpdateAutomation), sync (Sync).")
	fs.StringVar(&o.opts.StoragePath, "storage-path", "/data", "Directory for the tag store and the kept Git clones.")
	fs.IntVar(&o.opts.Concurrency, "concurrent", 4, "The number of objects of one kind reconciled at once.")
	fs.DurationVar(&o.opts.MinInterval, "min-interval", 30*time.Second,
		"The shortest time between two runs of an object: one whose spec.interval is shorter (Flux's kinds have no floor in their schemas) runs at most once per this; 0 turns the floor off.")
	// Kept so that managers started with it still start: Git work now takes
	// shares of the workers, as registry scans do (docs/operations.md).
	fs.Int("git-sessions-per-namespace", 2, "Ignored: one Git server and one namespace hold at most half the workers of a kind in Git work.")
	_ = fs.MarkDeprecated("git-sessions-per-namespace", "Git work takes at most half the workers of a kind per Git server and per namespace; see docs/operations.md")
	fs.IntVar(&o.registryConns, "registry-max-concurrent", 4, "The number of requests in flight to one registry host.")
	fs.Float64Var(&o.registryRate, "registry-qps", 0, "Requests per second to one registry host; 0 means no limit.")
	fs.StringSliceVar(&o.registryDeny, "registry-deny-cidrs", nil,
		"Comma-separated address ranges (CIDRs) no registry or Git connection may go to, checked on the resolved address when connecting; for clouds, 169.254.0.0/16,fd00:ec2::254/128 (link-local and the metadata services). Empty denies nothing.")
	fs.Int64Var(&o.opts.MaxCRDLayerSize, "crd-max-layer-size", 100<<20, "The largest artifact layer, uncompressed, read for CRD bundles, in bytes.")
	fs.StringVar(&o.opts.Webhook.Addr, "webhook-addr", "", "The address the webhook receivers bind to, such as :9292; empty turns them off.")
	fs.StringVar(&o.opts.Webhook.SecretName, "webhook-secret-name", webhook.DefaultSecretName, "The Secret, in each receiver's namespace, whose key `token` authenticates its notifications.")
	fs.StringVar(&o.opts.DefaultServiceAccount, "default-service-account", "",
		"The service account, in each Sync's namespace, that a Sync without serviceAccountName impersonates to apply to the local cluster; empty means the manager's own account.")
}

// leaderElectionID is the name of the manager's leader election Lease: one
// per set of controllers and watch selector, so that shards elect apart.
// `uprev check` finds the Lease with it.
func (o *managerOptions) leaderElectionID() string {
	return leaderelection.GenerateID("uprev", o.enabled, o.watchSelector)
}

// metricsOptions are the metrics server's: with --metrics-secure, HTTPS
// and controller-runtime's authentication and authorization filter, as
// kubebuilder's scaffold has it.
func (o *managerOptions) metricsOptions() metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		opts.SecureServing = true
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
		opts.CertDir = o.metricsCerts
	}
	return opts
}

// run runs the manager until ctx is done.
func (o *managerOptions) run(ctx context.Context) error {
	opts := o.opts
	opts.Controllers = strings.Split(o.enabled, ",")
	opts.Registry.MaxConcurrentPerHost = o.registryConns
	opts.Registry.RequestsPerSecond = o.registryRate
	deny, err := outbound.Parse(o.registryDeny)
	if err != nil {
		return fmt.Errorf("--registry-deny-cidrs: %w", err)
	}
	opts.DenyCIDRs = deny
	outbound.Install(deny)

	log := logger.NewLogger(o.logOpts)
	ctrl.SetLogger(log)
	if err := o.jitterOpts.SetGlobalJitter(controllers.JitterRand()); err != nil {
		return fmt.Errorf("setting interval jitter: %w", err)
	}
	gates := map[string]bool{}
	auth.SetFeatureGates(gates)
	if err := o.featureGates.WithLogger(log).SupportedFeatures(gates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	if on, _ := features.Enabled(auth.FeatureGateObjectLevelWorkloadIdentity); on {
		auth.EnableObjectLevelWorkloadIdentity()
	}

	scheme, err := controllers.NewScheme()
	if err != nil {
		return err
	}
	shard, err := fluxcontroller.GetWatchSelector(fluxcontroller.WatchOptions{LabelSelector: o.watchSelector})
	if err != nil {
		return fmt.Errorf("--watch-label-selector: %w", err)
	}
	leaseDuration, renewDeadline, retryPeriod := o.leaderOpts.LeaseDuration, o.leaderOpts.RenewDeadline, o.leaderOpts.RetryPeriod
	gracefulShutdown := 30 * time.Second
	mgrOpts := controllers.ManagerOptions(scheme, shard, opts.Webhook.SecretName)
	mgrOpts.Metrics = o.metricsOptions()
	mgrOpts.HealthProbeBindAddress = o.probeAddr
	mgrOpts.PprofBindAddress = o.pprofAddr
	mgrOpts.LeaderElection = o.leaderOpts.Enable
	mgrOpts.LeaderElectionID = o.leaderElectionID()
	mgrOpts.LeaderElectionNamespace = o.leaderNS
	mgrOpts.LeaderElectionReleaseOnCancel = o.leaderOpts.ReleaseOnCancel
	mgrOpts.LeaseDuration = &leaseDuration
	mgrOpts.RenewDeadline = &renewDeadline
	mgrOpts.RetryPeriod = &retryPeriod
	mgrOpts.GracefulShutdownTimeout = &gracefulShutdown
	cfg, err := o.restConfig(ctx)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	probes.SetupChecks(mgr, log)

	if err := controllers.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	if err := version.RegisterBuildInfo(crmetrics.Registry); err != nil {
		return err
	}
	log.Info("Starting manager", "version", version.Version(), "controllers", opts.Controllers)
	warnWithoutLockdown(log, opts)
	return mgr.Start(ctx)
}

// warnWithoutLockdown warns, at start, when a lockdown flag is missing: such
// a manager is for one trusted team (config/default), since a Sync without
// --default-service-account applies with the manager's own rights, which
// can patch every Sync and automation of the cluster (docs/security.md).
func warnWithoutLockdown(log logr.Logger, opts controllers.Options) {
	var missing []string
	if opts.DefaultServiceAccount == "" {
		missing = append(missing, "--default-service-account")
	}
	if !opts.ACL.NoCrossNamespaceRefs {
		missing = append(missing, "--no-cross-namespace-refs")
	}
	if len(missing) == 0 {
		return
	}
	log.Info("Warning: running without the multi-tenant lockdown, for one trusted team only: "+
		"a Sync without serviceAccountName applies with the manager's own rights, which can change every Sync and automation in the cluster; "+
		"set the missing flags (config/multitenant does) when several teams share the cluster",
		"missing", missing)
}
