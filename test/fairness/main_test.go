// Package fairness runs the uprev binary with a tenant whose Git server
// never answers, and shows that the other tenants' Syncs and automations
// go on as before: every Git call has a deadline and one namespace's Git
// work holds only a few workers.
package fairness

import (
	"context"
	"os"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

var (
	// k8s reaches the shared cluster as an administrator.
	k8s client.Client
	// kubeconfigPath is the file the manager reads the admin's kubeconfig from.
	kubeconfigPath string
)

func TestMain(m *testing.M) {
	os.Exit(manager.RunSuite(m, "fairness", func(c *manager.Cluster) error {
		k8s, kubeconfigPath = c.Client, c.KubeConfigPath
		return nil
	}))
}

func init() {
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}

// startManager runs the uprev binary with the given flags on top of the
// test defaults, until the test ends.
func startManager(t testing.TB, flags ...string) *manager.Process {
	t.Helper()
	return manager.Start(t, manager.Build(t), kubeconfigPath, t.TempDir(), flags...)
}

// newNamespace creates a namespace for one test.
func newNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// create creates obj, failing the test otherwise, and deletes it when the
// test ends, while the test's manager still runs, so that a later test's
// manager does not spend its workers on this test's stopped servers.
func create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() {
		if err := k8s.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting %T %s: %v", obj, obj.GetName(), err)
		}
	})
}

// readyCondition returns a function that reads obj's Ready condition.
func readyCondition(obj client.Object, conds func() []metav1.Condition) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		return apimeta.FindStatusCondition(conds(), meta.ReadyCondition)
	}
}

// makePolicy makes the ImageRepository and ImagePolicy agent in ns, of
// acme/agent in reg (interval 1h, semver >=1.0.0), and waits until the
// policy is Ready.
func makePolicy(t testing.TB, g Gomega, ns string, reg *registry.Registry) (*imagev1.ImageRepository, *imagev1.ImagePolicy) {
	t.Helper()
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: reg.Image("acme/agent"), Insecure: true, Interval: metav1.Duration{Duration: time.Hour}},
	}
	create(t, repo)
	pol := &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Name: "agent"},
			Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
		},
	}
	create(t, pol)
	g.Eventually(readyCondition(pol, func() []metav1.Condition { return pol.Status.Conditions }), time.Minute).
		Should(HaveField("Status", metav1.ConditionTrue))
	return repo, pol
}
