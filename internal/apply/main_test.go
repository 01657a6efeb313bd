package apply

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

var (
	// testCluster is the control plane shared by the package's tests.
	testCluster *cluster.Cluster
	// testApplier applies to testCluster.
	testApplier *Applier
	// k8sClient inspects and edits testCluster directly, as an admin.
	k8sClient client.Client
	// extraClusters are started on demand by the multi-cluster benchmark.
	extraClusters []*cluster.Cluster
	// nextID makes namespace and group names unique.
	nextID atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	testCluster, err = cluster.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop(testCluster)
	defer func() {
		for _, c := range extraClusters {
			stop(c)
		}
	}()
	if testApplier, err = NewApplier(testCluster.Config, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if k8sClient, err = client.New(testCluster.Config, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func stop(c *cluster.Cluster) {
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping control plane:", err)
	}
}

// uniqueName returns prefix followed by a number unique in this run.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, nextID.Add(1))
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uniqueName(strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))}}
	g.Expect(k8sClient.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// manifests writes documents to files in a fresh directory, one file per
// name, and builds it.
func manifests(t *testing.T, files map[string]string) []*unstructured.Unstructured {
	t.Helper()
	dir := writeDir(t, files)
	objects, err := Build(dir)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return objects
}

// writeDir writes files (relative name to content) under a new directory.
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// get reads an object from the cluster by kind, namespace and name.
func get(apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u)
	return u, err
}

// id returns an inventory id.
func id(namespace, name, group, kind string) string {
	return namespace + "_" + name + "_" + group + "_" + kind
}

const configMapYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
  namespace: %s
data:
  key: "%s"
`

const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
  namespace: %s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: app
        image: ghcr.io/acme/app:1.0.0
`
