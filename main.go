// Command uprev runs uprev's controllers: image scanning (ImageRepository,
// ImagePolicy), write-back (UpdateAutomation) and apply (Sync). A flag picks
// a subset, so the apply loop can run alone in each workload cluster.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/client"
	"github.com/fluxcd/pkg/runtime/jitter"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	"github.com/fluxcd/pkg/runtime/logger"
	"github.com/fluxcd/pkg/runtime/probes"
	flag "github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/webhook"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "plan" {
		os.Exit(runPlan(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "uprev:", err)
		os.Exit(1)
	}
}

// run parses flags and runs the manager until it is signalled to stop.
func run(args []string) error {
	var (
		clientOpts    client.Options
		leaderOpts    leaderelection.Options
		logOpts       logger.Options
		jitterOpts    jitter.IntervalOptions
		metricsAddr   string
		probeAddr     string
		enabled       string
		opts          controllers.Options
		registryRate  float64
		registryConns int
	)
	fs := flag.NewFlagSet("uprev", flag.ContinueOnError)
	clientOpts.BindFlags(fs)
	opts.KubeConfig.BindFlags(fs)
	opts.ACL.BindFlags(fs)
	leaderOpts.BindFlags(fs)
	logOpts.BindFlags(fs)
	jitterOpts.BindFlags(fs)
	fs.StringVar(&metricsAddr, "metrics-addr", ":8080", "The address the Prometheus metrics endpoint binds to.")
	fs.StringVar(&probeAddr, "health-addr", ":9440", "The address the health and readiness probes bind to.")
	fs.StringVar(&enabled, "controllers", strings.Join(controllers.AllControllers, ","),
		"Comma-separated controllers to run: image (ImageRepository, ImagePolicy), automation (UpdateAutomation), sync (Sync).")
	fs.StringVar(&opts.StoragePath, "storage-path", "/data", "Directory for the tag store and the kept Git clones.")
	fs.IntVar(&opts.Concurrency, "concurrent", 4, "The number of objects of one kind reconciled at once.")
	fs.IntVar(&registryConns, "registry-max-concurrent", 4, "The number of requests in flight to one registry host.")
	fs.Float64Var(&registryRate, "registry-qps", 0, "Requests per second to one registry host; 0 means no limit.")
	fs.Int64Var(&opts.MaxCRDLayerSize, "crd-max-layer-size", 100<<20, "The largest artifact layer, uncompressed, read for CRD bundles, in bytes.")
	fs.StringVar(&opts.Webhook.Addr, "webhook-addr", "", "The address the webhook receivers bind to, such as :9292; empty turns them off.")
	fs.StringVar(&opts.Webhook.SecretName, "webhook-secret-name", webhook.DefaultSecretName, "The Secret, in each receiver's namespace, whose key `token` authenticates its notifications.")
	fs.StringVar(&opts.DefaultServiceAccount, "default-service-account", "",
		"The service account, in each Sync's namespace, that a Sync without serviceAccountName impersonates to apply to the local cluster; empty means the manager's own account.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts.Controllers = strings.Split(enabled, ",")
	opts.Registry.MaxConcurrentPerHost = registryConns
	opts.Registry.RequestsPerSecond = registryRate

	log := logger.NewLogger(logOpts)
	ctrl.SetLogger(log)
	if err := jitterOpts.SetGlobalJitter(controllers.JitterRand()); err != nil {
		return fmt.Errorf("setting interval jitter: %w", err)
	}

	scheme, err := controllers.NewScheme()
	if err != nil {
		return err
	}
	leaseDuration, renewDeadline, retryPeriod := leaderOpts.LeaseDuration, leaderOpts.RenewDeadline, leaderOpts.RetryPeriod
	mgr, err := ctrl.NewManager(client.GetConfigOrDie(clientOpts), ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:        probeAddr,
		LeaderElection:                leaderOpts.Enable,
		LeaderElectionID:              leaderelection.GenerateID("uprev", enabled),
		LeaderElectionReleaseOnCancel: leaderOpts.ReleaseOnCancel,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
		GracefulShutdownTimeout:       ptr(30 * time.Second),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	probes.SetupChecks(mgr, log)

	ctx := ctrl.SetupSignalHandler()
	if err := controllers.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	log.Info("Starting manager", "controllers", opts.Controllers)
	return mgr.Start(ctx)
}

func ptr[T any](v T) *T { return &v }
