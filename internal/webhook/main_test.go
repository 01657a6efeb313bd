package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/testlog"
	"github.com/uprev-dev/uprev/internal/webhook"
)

// controlPlane is the real control plane the receiver tests share, with a
// manager without controllers running for its cache.
type controlPlane struct {
	// cached is the manager's client, as the receiver gets it in
	// production: Secrets and lists from the cache.
	cached client.Client
	// direct reads and writes the API server without a cache, so that
	// assertions see every patch the receiver made before answering.
	direct client.WithWatch

	cluster     *cluster.Cluster
	stopManager context.CancelFunc
	managerDone chan error
}

var (
	sharedOnce sync.Once
	// shared is the control plane, once a test has started it.
	shared    *controlPlane
	sharedErr error
)

func TestMain(m *testing.M) {
	os.Exit(testlog.Run("webhook", func() int {
		code := m.Run()
		if shared != nil {
			if err := shared.stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				code = 1
			}
		}
		return code
	}))
}

// startControlPlane returns the shared control plane, starting it for the
// first test that needs one. Tests of the parsers, and fuzz workers, never
// call it, so they start no kube-apiserver or etcd; TestMain stops it after
// the last test.
func startControlPlane(t testing.TB) *controlPlane {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = newControlPlane() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// newControlPlane starts a control plane and a manager without
// controllers, and waits for the manager's cache.
func newControlPlane() (*controlPlane, error) {
	c, err := cluster.Start()
	if err != nil {
		return nil, err
	}
	cp, err := startManager(c)
	if err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping control plane: %w", stopErr))
		}
		return nil, err
	}
	return cp, nil
}

// startManager starts a manager on c and returns the control plane with
// both clients once the manager's cache has synced.
func startManager(c *cluster.Cluster) (*controlPlane, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, imagev1.AddToScheme, uprevv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	direct, err := client.NewWithWatch(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the direct client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cp := &controlPlane{cached: mgr.GetClient(), direct: direct, cluster: c, stopManager: cancel, managerDone: make(chan error, 1)}
	go func() { cp.managerDone <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, errors.Join(errors.New("the manager's cache did not sync"), <-cp.managerDone)
	}
	return cp, nil
}

// stop stops the manager and the control plane.
func (cp *controlPlane) stop() error {
	cp.stopManager()
	var errs []error
	if err := <-cp.managerDone; err != nil {
		errs = append(errs, fmt.Errorf("manager: %w", err))
	}
	if err := cp.cluster.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("stopping control plane: %w", err))
	}
	return errors.Join(errs...)
}

// newReceiver returns a receiver using the manager's client.
func (cp *controlPlane) newReceiver() *webhook.Receiver {
	return &webhook.Receiver{Client: cp.cached, Secrets: cp.cached}
}

// newNamespace creates a namespace for one test, with a receiver Secret
// holding token unless token is empty.
func (cp *controlPlane) newNamespace(t testing.TB, token string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-"}}
	if err := cp.direct.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if token != "" {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: webhook.DefaultSecretName},
			Data:       map[string][]byte{webhook.TokenKey: []byte(token + "\n")},
		}
		if err := cp.direct.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	return ns.Name
}

// newImageRepository creates an ImageRepository for image.
func (cp *controlPlane) newImageRepository(t testing.TB, namespace, name, image string) {
	t.Helper()
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       imagev1.ImageRepositorySpec{Image: image, Interval: metav1.Duration{Duration: 3600_000_000_000}},
	}
	if err := cp.direct.Create(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
}

// requestedAt returns the reconcile request annotation of obj, read from
// the API server.
func (cp *controlPlane) requestedAt(t testing.TB, obj client.Object, namespace, name string) string {
	t.Helper()
	if err := cp.direct.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj.GetAnnotations()[meta.ReconcileRequestAnnotation]
}
