package controllers

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// remoteClusters are two more control planes standing in for workload
// clusters, started once for the Sync tests that need them.
var remoteClusters remotes

// remotes are the eu and us clusters with their kubeconfigs and clients.
type remotes struct {
	once   sync.Once
	err    error
	eu, us *cluster.Cluster
	euKC   []byte
	usKC   []byte
	euC    client.Client
	usC    client.Client
}

// startRemoteClusters starts the eu and us clusters on first use, and
// the management cluster (useCluster), which they trust.
func startRemoteClusters(t testing.TB) {
	t.Helper()
	useCluster(t)
	rc := &remoteClusters
	rc.once.Do(func() {
		start := func() (*cluster.Cluster, []byte, client.Client, error) {
			c, err := cluster.Start()
			if err != nil {
				return nil, nil, nil, err
			}
			kc, err := c.KubeConfig()
			if err != nil {
				return nil, nil, nil, err
			}
			cl, err := client.New(c.Config, client.Options{Scheme: k8s.Scheme()})
			return c, kc, cl, err
		}
		if rc.eu, rc.euKC, rc.euC, rc.err = start(); rc.err != nil {
			return
		}
		rc.us, rc.usKC, rc.usC, rc.err = start()
	})
	if rc.err != nil {
		t.Fatalf("starting remote clusters: %v", rc.err)
	}
}

// stopRemoteClusters stops what startRemoteClusters started.
func stopRemoteClusters() {
	for _, c := range []*cluster.Cluster{remoteClusters.eu, remoteClusters.us} {
		if c != nil {
			_ = c.Stop()
		}
	}
}

// kubeConfigSecret creates the Secret of a remote target.
func kubeConfigSecret(t testing.TB, ns, name string, kubeconfig []byte) {
	t.Helper()
	err := k8s.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string][]byte{kubeConfigKey: kubeconfig},
	})
	if err != nil {
		t.Fatalf("creating kubeconfig secret: %v", err)
	}
}

// ensureNamespace creates namespace ns in a remote cluster.
func ensureNamespace(t testing.TB, c client.Client, ns string) {
	t.Helper()
	err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
}

// twoRemoteTargets makes a namespace here and in the eu and us clusters,
// with the kubeconfig Secrets eu-1 and us-1.
func twoRemoteTargets(t *testing.T) (string, *remotes) {
	t.Helper()
	startRemoteClusters(t)
	ns := newNamespace(t)
	rc := &remoteClusters
	ensureNamespace(t, rc.euC, ns)
	ensureNamespace(t, rc.usC, ns)
	kubeConfigSecret(t, ns, "eu-1", rc.euKC)
	kubeConfigSecret(t, ns, "us-1", rc.usKC)
	return ns, rc
}

// inWaves targets eu-1 then us-1, waiting up to timeout for health.
func inWaves(timeout time.Duration) func(*uprevv1.Sync) {
	return func(s *uprevv1.Sync) {
		s.Spec.Targets = []uprevv1.Target{
			{Name: "eu-1", KubeConfig: &uprevv1.KubeConfigReference{SecretRef: metaRef("eu-1")}},
			{Name: "us-1", KubeConfig: &uprevv1.KubeConfigReference{SecretRef: metaRef("us-1")}},
		}
		s.Spec.Rollout = &uprevv1.Rollout{Waves: [][]string{{"eu-1"}, {"us-1"}}}
		s.Spec.Wait = true
		s.Spec.Timeout = &metav1.Duration{Duration: timeout}
	}
}
