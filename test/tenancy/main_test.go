// Package tenancy runs the uprev binary with Flux's lockdown flags in a
// cluster that several teams share, and shows what each flag closes: target
// kubeconfigs that would run a program or read the manager's files, Syncs
// that write outside their namespace, references across namespaces, and
// secrets in the manager's own output.
package tenancy

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
)

var (
	// k8s reaches the shared cluster as an administrator.
	k8s client.Client
	// adminKubeConfig is an administrator's kubeconfig of the cluster,
	// with inline credentials.
	adminKubeConfig []byte
	// kubeconfigPath is the file the manager reads adminKubeConfig from.
	kubeconfigPath string
)

// TestMain shares one control plane between the tests; each test runs its
// own manager with the flags it shows.
func TestMain(m *testing.M) {
	os.Exit(manager.RunSuite(m, "tenancy", func(c *manager.Cluster) error {
		k8s, kubeconfigPath = c.Client, c.KubeConfigPath
		var err error
		adminKubeConfig, err = c.KubeConfig()
		return err
	}))
}

func init() {
	SetDefaultEventuallyTimeout(time.Minute)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
}

// startManager runs the uprev binary with the given flags on top of the
// test defaults, until the test ends.
func startManager(t *testing.T, flags ...string) *manager.Process {
	t.Helper()
	return manager.Start(t, manager.Build(t), kubeconfigPath, t.TempDir(), flags...)
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// createSecret creates a Secret with data.
func createSecret(t *testing.T, ns, name string, data map[string][]byte) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatalf("creating secret: %v", err)
	}
}

// adminConfig returns the administrator's kubeconfig, parsed, for tests to
// change.
func adminConfig(t *testing.T) (cfg *clientcmdapi.Config, user string) {
	t.Helper()
	c, err := clientcmd.Load(adminKubeConfig)
	if err != nil {
		t.Fatalf("parsing the admin kubeconfig: %v", err)
	}
	return c, c.Contexts[c.CurrentContext].AuthInfo
}

// kubeConfigBytes serializes cfg.
func kubeConfigBytes(t *testing.T, cfg *clientcmdapi.Config) []byte {
	t.Helper()
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatalf("writing kubeconfig: %v", err)
	}
	return data
}

// configMap is a ConfigMap manifest.
func configMap(ns, name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  key: value\n", name, ns)
}

// newSync creates a Sync of path in url with the given targets.
func newSync(t *testing.T, ns, url string, targets ...uprevv1.Target) *uprevv1.Sync {
	t.Helper()
	s := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apps"},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
			Path:     "./",
			Targets:  targets,
			Prune:    true,
		},
	}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatalf("creating Sync: %v", err)
	}
	return s
}

// remoteTarget is a target reached through the kubeconfig in Secret name.
func remoteTarget(name string) uprevv1.Target {
	return uprevv1.Target{Name: name, KubeConfig: &uprevv1.KubeConfigReference{SecretRef: meta.LocalObjectReference{Name: name}}}
}

// readyCondition returns a function that reads obj's Ready condition.
func readyCondition(obj client.Object, conds func() []metav1.Condition) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		for _, c := range conds() {
			if c.Type == meta.ReadyCondition {
				return &c
			}
		}
		return nil
	}
}

// exists tells whether the object key of kind obj exists.
func exists(g Gomega, obj client.Object, ns, name string) bool {
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if err != nil {
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return false
	}
	return true
}

// localTarget is the cluster the manager runs in.
func localTarget() uprevv1.Target { return uprevv1.Target{Name: "local"} }

// requestReconcile asks the controllers to reconcile obj now, as
// `flux reconcile` does.
func requestReconcile(t *testing.T, obj client.Object) {
	t.Helper()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[meta.ReconcileRequestAnnotation] = time.Now().Format(time.RFC3339Nano)
	obj.SetAnnotations(ann)
	if err := k8s.Patch(context.Background(), obj, patch); err != nil {
		t.Fatalf("requesting a reconcile: %v", err)
	}
}
