package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
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
	"github.com/uprev-dev/uprev/internal/testenv/parallel"
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
	// The parallel tests mostly wait (a clone's sweep, the release notes'
	// deadline, a policy's quiet wait, Gitea's pull requests), each on its
	// own servers and objects: all nine run at once.
	parallel.AtLeast(9)
	os.Exit(testlog.Run("controllers", func() int {
		code := m.Run()
		if err := stopSuite(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return code
	}))
}

// The control plane and the manager are started once, by the first test
// that needs them (useCluster), and stopped after the last test: a run of
// the tests of pure functions alone starts nothing and needs no
// KUBEBUILDER_ASSETS.
var (
	suiteOnce sync.Once
	suiteErr  error
	// suiteStops undo what startSuite did, last first.
	suiteStops []func() error
)

// useCluster starts the control plane and the manager, once, for a test
// that reaches them (k8s, apiServer, testCluster, storagePath,
// githubReleases), and fails it when they cannot start. newNamespace calls
// it; TestClusterTestsStartTheCluster checks that every other test that
// needs the cluster does.
func useCluster(tb testing.TB) {
	tb.Helper()
	suiteOnce.Do(func() { suiteErr = startSuite() })
	if suiteErr != nil {
		tb.Fatalf("starting the control plane and the manager: %v", suiteErr)
	}
}

// stopSuite stops what startSuite started, if it ran.
func stopSuite() error {
	var errs []error
	for i := len(suiteStops) - 1; i >= 0; i-- {
		errs = append(errs, suiteStops[i]())
	}
	return errors.Join(errs...)
}

// onStop adds f to what stopSuite does.
func onStop(f func() error) { suiteStops = append(suiteStops, f) }

// startSuite starts a real control plane and the manager with every
// controller.
func startSuite() error {
	caFile, err := trustCloudCA()
	onStop(func() error { _ = os.Remove(caFile); return nil }) // a temporary file
	if err != nil {
		return err
	}
	stopCloud, err := startCloudNet()
	onStop(func() error { stopCloud(); return nil })
	if err != nil {
		return err
	}
	// A management cluster: Syncs select Cluster API Clusters here. The
	// suites of test/ run the manager on clusters without Cluster API.
	c, err := cluster.StartWithClusterAPI()
	if err != nil {
		return err
	}
	onStop(func() error {
		if err := c.Stop(); err != nil {
			return fmt.Errorf("stopping control plane: %w", err)
		}
		return nil
	})
	testCluster = c

	storage, err := os.MkdirTemp("", "uprev-controllers-")
	if err != nil {
		return err
	}
	storagePath = storage
	onStop(func() error { _ = os.RemoveAll(storage); return nil }) // a temporary directory

	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	mgrOpts := ManagerOptions(scheme, labels.Everything(), "")
	mgrOpts.Metrics = metricsserver.Options{BindAddress: "0"}
	mgr, err := ctrl.NewManager(c.Config, mgrOpts)
	if err != nil {
		return err
	}
	notifications := httptest.NewServer(http.HandlerFunc(notificationController.receive))
	onStop(func() error { notifications.Close(); return nil })
	releases, stopReleases := githubapi.ServeReleases()
	onStop(func() error { stopReleases(); return nil })
	githubReleases = releases
	opts := Options{Controllers: AllControllers, StoragePath: storage, Concurrency: 4, Registry: testRegistryOptions,
		GitHubReleasesAPI: releases.URL, EventsAddr: notifications.URL, TokenCache: fluxcache.TokenFlags{MaxSize: 100, MaxDuration: time.Hour}, Clock: testClock}
	ctx, cancel := context.WithCancel(context.Background())
	if err := Setup(ctx, mgr, opts); err != nil {
		cancel()
		return err
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	onStop(func() error {
		stopRemoteClusters()
		cancel()
		if err := <-done; err != nil {
			return fmt.Errorf("manager: %w", err)
		}
		return nil
	})
	k8s = mgr.GetClient()
	apiServer = mgr.GetAPIReader()
	return nil
}

// newNamespace creates a namespace for one test.
func newNamespace(t testing.TB) string {
	t.Helper()
	useCluster(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		// The test control plane has no namespace controller: a deleted
		// namespace keeps its objects, and the manager would go on
		// scanning and pushing to servers the test has stopped, whose
		// ports later tests' servers may get. So the objects the manager
		// reconciles go first (their finalizers let it stop).
		for _, kind := range reconciledKinds() {
			_ = k8s.DeleteAllOf(context.Background(), kind, client.InNamespace(ns.Name))
		}
		_ = k8s.Delete(context.Background(), ns)
	})
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
