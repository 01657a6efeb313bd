// Package fairness runs the uprev binary with a tenant whose Git server
// never answers, and shows that the other tenants' Syncs and automations
// go on as before: every Git call has a deadline and one namespace's Git
// work holds only a few workers.
package fairness

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/parallel"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

var (
	// k8s reaches the shared cluster as an administrator.
	k8s client.Client
	// kubeconfigPath is the file the manager reads the admin's kubeconfig from.
	kubeconfigPath string
)

func TestMain(m *testing.M) {
	// The tests mostly wait on servers that answer slowly or never, each
	// with its own manager: all eight run at once.
	parallel.AtLeast(8)
	os.Exit(manager.RunSuite(m, "fairness", func(c *manager.Cluster) error {
		k8s, kubeconfigPath = c.Client, c.KubeConfigPath
		return nil
	}))
}

func init() {
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}

// shardLabel gives each test's objects to the test's own manager (its
// --watch-label-selector, as sharded managers run), so that the tests run
// side by side and each manager sees its own test's objects only: one
// test's dead servers take none of another test's workers.
const shardLabel = "sharding.fluxcd.io/key"

// shardOf returns the value of shardLabel for t's objects: t's name, as a
// label value.
func shardOf(t testing.TB) string {
	v := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	if len(v) > validation.LabelValueMaxLength {
		v = v[:validation.LabelValueMaxLength]
	}
	return strings.Trim(v, "-")
}

// startManager runs the uprev binary with the given flags on top of the
// test defaults, reconciling t's objects only, until the test ends.
func startManager(t testing.TB, flags ...string) *manager.Process {
	t.Helper()
	flags = append([]string{"--watch-label-selector=" + shardLabel + "=" + shardOf(t)}, flags...)
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

// create creates obj, labelled for t's manager, failing the test
// otherwise, and deletes it when the test ends.
func create(t testing.TB, obj client.Object) {
	t.Helper()
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[shardLabel] = shardOf(t)
	obj.SetLabels(labels)
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
