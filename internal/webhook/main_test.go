package webhook_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/webhook"
)

var (
	// cached is the manager's client, as the receiver gets it in
	// production: Secrets and lists from the cache.
	cached client.Client
	// direct reads and writes the API server without a cache, so that
	// assertions see every patch the receiver made before answering.
	direct client.WithWatch
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// runSuite starts a real control plane and a manager without controllers
// (for its cache), runs the tests and stops both.
func runSuite(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zap.Options{}.Level)))
	c, err := cluster.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Stop()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, imagev1.AddToScheme, uprevv1.AddToScheme} {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if direct, err = client.NewWithWatch(c.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "cache did not sync")
		return 1
	}
	cached = mgr.GetClient()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

// newReceiver returns a receiver using the manager's client.
func newReceiver() *webhook.Receiver {
	return &webhook.Receiver{Client: cached, Secrets: cached}
}

// newNamespace creates a namespace for one test, with a receiver Secret
// holding token unless token is empty.
func newNamespace(t testing.TB, token string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-"}}
	if err := direct.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if token != "" {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: webhook.DefaultSecretName},
			Data:       map[string][]byte{webhook.TokenKey: []byte(token + "\n")},
		}
		if err := direct.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	return ns.Name
}

// newImageRepository creates an ImageRepository for image.
func newImageRepository(t testing.TB, namespace, name, image string) {
	t.Helper()
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       imagev1.ImageRepositorySpec{Image: image, Interval: metav1.Duration{Duration: 3600_000_000_000}},
	}
	if err := direct.Create(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
}

// requestedAt returns the reconcile request annotation of obj, read from
// the API server.
func requestedAt(t testing.TB, obj client.Object, namespace, name string) string {
	t.Helper()
	if err := direct.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj.GetAnnotations()[meta.ReconcileRequestAnnotation]
}
