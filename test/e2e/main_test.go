package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/jitter"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/freeport"
	"github.com/uprev-dev/uprev/internal/testenv/testlog"
)

// Reached by every test of the suite, set up by TestMain.
var (
	// k8s reads and writes the cluster uprev runs in, uncached, so that
	// what a test reads is what the API server holds.
	k8s client.Client
	// scheme knows every kind uprev reads or writes.
	scheme *runtime.Scheme
	// webhookURL is the base URL of the manager's webhook receivers.
	webhookURL string
)

// intervalJitter is the manager's default --interval-jitter-percentage, so that
// intervals behave as in a default installation.
const intervalJitter = 0.05

func TestMain(m *testing.M) {
	// The manager's log goes to a file, printed when the run fails, so
	// that benchmark figures and test output stay readable.
	os.Exit(testlog.Run("e2e", func() int { return runSuite(m) }))
}

// runSuite starts a control plane and the uprev manager with every
// controller and the webhook receivers, runs the tests and benchmarks, and
// stops everything, including the remote clusters tests started.
func runSuite(m *testing.M) int {
	// A nil source would give jitter its own math/rand.Rand, which is not
	// safe for concurrent use and which the reconcilers would race on.
	jitter.SetGlobalIntervalJitter(intervalJitter, controllers.JitterRand())

	c, err := cluster.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = c.Stop() }()
	defer stopRemoteClusters()

	storage, err := os.MkdirTemp("", "uprev-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(storage) }()

	webhookAddr, err := freeport.Reserve()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: finding a port for the webhook receivers:", err)
		return 1
	}
	webhookURL = "http://" + webhookAddr

	if scheme, err = controllers.NewScheme(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// The product's cache and client: a cache the product does not keep
	// (SyncTargets) could lag the change that runs a controller.
	mgrOpts := controllers.ManagerOptions(scheme, labels.Everything(), "")
	mgrOpts.Metrics = metricsserver.Options{BindAddress: "0"}
	mgr, err := ctrl.NewManager(c.Config, mgrOpts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: creating the manager:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := controllers.Options{
		Controllers: controllers.AllControllers,
		StoragePath: storage,
		Concurrency: 4,
	}
	opts.Webhook.Addr = webhookAddr
	if err := controllers.Setup(ctx, mgr, opts); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: setting up the controllers:", err)
		return 1
	}
	if k8s, err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: creating a client:", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	code := m.Run()

	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "e2e: manager:", err)
		code = 1
	}
	return code
}

func init() {
	// Generous: the suite shares two cores with the race detector and
	// other work; a healthy step takes well under a second.
	SetDefaultEventuallyTimeout(90 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
}

// remoteCluster is a control plane standing in for a workload cluster
// that a Sync reaches through a kubeconfig Secret.
type remoteCluster struct {
	*cluster.Cluster
	// kubeConfig reaches it as an administrator, as a Secret's value.
	kubeConfig []byte
	// client reads it, uncached.
	client client.Client
}

// remotes are the two remote clusters, eu-1 and us-1, started on first use
// and shared by the tests that need them.
var remotes struct {
	once   sync.Once
	err    error
	eu, us *remoteCluster
}

// remoteClusters returns eu-1 and us-1, starting them (in parallel) the
// first time; it fails the test when they cannot be started.
func remoteClusters(t testing.TB) (eu, us *remoteCluster) {
	t.Helper()
	remotes.once.Do(func() {
		var wg sync.WaitGroup
		var euErr, usErr error
		wg.Go(func() { remotes.eu, euErr = startRemoteCluster() })
		wg.Go(func() { remotes.us, usErr = startRemoteCluster() })
		wg.Wait()
		if euErr != nil {
			remotes.err = euErr
		} else {
			remotes.err = usErr
		}
	})
	if remotes.err != nil {
		t.Fatalf("starting the remote clusters: %v", remotes.err)
	}
	return remotes.eu, remotes.us
}

func startRemoteCluster() (*remoteCluster, error) {
	c, err := cluster.Start()
	if err != nil {
		return nil, err
	}
	kc, err := c.KubeConfig()
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	return &remoteCluster{Cluster: c, kubeConfig: kc, client: cl}, nil
}

// stopRemoteClusters stops the remote clusters that were started.
func stopRemoteClusters() {
	for _, rc := range []*remoteCluster{remotes.eu, remotes.us} {
		if rc != nil {
			_ = rc.Stop()
		}
	}
}
