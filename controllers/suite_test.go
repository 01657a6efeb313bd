package controllers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	fluxcache "github.com/fluxcd/pkg/cache"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/testlog"
)

// k8s reaches the test cluster, where the real manager runs.
var k8s client.Client

// apiServer reads from the API server, not the manager's cache, which
// keeps objects without their managed fields and may lag a write.
var apiServer client.Reader

// testCluster is the test cluster, for what a client cannot read (its
// metrics).
var testCluster *cluster.Cluster

// storagePath is the manager's --storage-path.
var storagePath string

// githubReleases stands in for GitHub's releases API, which the manager
// reads the release notes of sources on github.com from.
var githubReleases *githubapi.Releases

// testRegistryOptions make registry retries quick enough for tests.
var testRegistryOptions = registry.ScannerOptions{BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}

func TestMain(m *testing.M) {
	os.Exit(testlog.Run("controllers", func() int { return runSuite(m) }))
}

// runSuite starts a real control plane and the manager with every
// controller, runs the tests and stops both.
func runSuite(m *testing.M) int {
	caFile, err := trustCloudCA()
	defer func() { _ = os.Remove(caFile) }() // a temporary file
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stopCloud, err := startCloudNet()
	defer stopCloud()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A management cluster: Syncs select Cluster API Clusters here. The
	// suites of test/ run the manager on clusters without Cluster API.
	c, err := cluster.StartWithClusterAPI()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
	}()
	testCluster = c

	storage, err := os.MkdirTemp("", "uprev-controllers-")
	storagePath = storage
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(storage) }() // a temporary directory

	scheme, err := NewScheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgrOpts := ManagerOptions(scheme, labels.Everything(), "")
	mgrOpts.Metrics = metricsserver.Options{BindAddress: "0"}
	mgr, err := ctrl.NewManager(c.Config, mgrOpts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notifications := httptest.NewServer(http.HandlerFunc(notificationController.receive))
	defer notifications.Close()
	releases, stopReleases := githubapi.ServeReleases()
	defer stopReleases()
	githubReleases = releases
	opts := Options{Controllers: AllControllers, StoragePath: storage, Concurrency: 4, Registry: testRegistryOptions,
		GitHubReleasesAPI: releases.URL, EventsAddr: notifications.URL, TokenCache: fluxcache.TokenFlags{MaxSize: 100, MaxDuration: time.Hour}, Clock: testClock}
	if err := Setup(ctx, mgr, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	k8s = mgr.GetClient()
	apiServer = mgr.GetAPIReader()
	code := m.Run()
	stopRemoteClusters()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

// newNamespace creates a namespace for one test.
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

func init() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}

// eventsList is the list type of events.k8s.io/v1 events.
type eventsList = eventsv1.EventList

// metaRef is a reference to a Secret or other object by name.
func metaRef(name string) meta.LocalObjectReference {
	return meta.LocalObjectReference{Name: name}
}
