package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/install"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// crdGVK is the kind of CustomResourceDefinitions.
var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// emptyCluster is a control plane of its own, without uprev's CRDs, as a
// cluster uprev is installed on is.
type emptyCluster struct {
	*cluster.Cluster
	// k8s reaches it as an administrator.
	k8s client.Client
	// kubeconfig is the path of an administrator's kubeconfig of it.
	kubeconfig string
}

// startEmptyCluster starts an emptyCluster for one test.
func startEmptyCluster(t *testing.T) *emptyCluster {
	t.Helper()
	c, err := cluster.StartEmpty(cluster.AssetsDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping control plane: %v", err)
		}
	})
	kc, err := c.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	scheme, err := controllers.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &emptyCluster{Cluster: c, k8s: cl, kubeconfig: path}
}

// kubectl runs the kubectl of the control-plane assets from the
// repository root, with stdin, against kubeconfig (none when empty).
func kubectl(t *testing.T, kubeconfig string, stdin []byte, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(cluster.AssetsDir(), "kubectl"), args...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = []string{"HOME=" + t.TempDir(), "KUBECONFIG=" + kubeconfig, "KUBECTL_KUBERC=false"}
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// decodeYAML decodes a multi-document YAML stream, keyed by kind,
// namespace and name.
func decodeYAML(g Gomega, stream string) map[string]*unstructured.Unstructured {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	objs := map[string]*unstructured.Unstructured{}
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			g.Expect(err.Error()).To(Equal("EOF"))
			return objs
		}
		if len(obj.Object) > 0 {
			objs[obj.GetKind()+" "+obj.GetNamespace()+"/"+obj.GetName()] = obj
		}
	}
}

// withImage returns obj with every container of a Deployment running image.
func withImage(g Gomega, obj *unstructured.Unstructured, image string) *unstructured.Unstructured {
	if obj.GetKind() != "Deployment" {
		return obj
	}
	containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range containers {
		c.(map[string]any)["image"] = image
	}
	g.Expect(unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers")).To(Succeed())
	return obj
}

func TestInstallExportIsConfigDefault(t *testing.T) {
	g := NewWithT(t)
	const image = "registry.example.com/platform/uprev:v1.2.3"
	for _, tc := range []struct{ dir, flag string }{{"config/default", ""}, {"config/multitenant", "--multitenant"}} {
		args := []string{"install", "--export", "--image", "registry.example.com/platform/uprev", "--version", "v1.2.3"}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		res := uprev(t, args...)
		g.Expect(res.code).To(Equal(0), res.stderr)
		g.Expect(res.stdout).To(HavePrefix("# uprev "))
		exported := decodeYAML(g, res.stdout)
		built, err := kubectl(t, "", nil, "kustomize", tc.dir)
		g.Expect(err).NotTo(HaveOccurred(), built)
		want := decodeYAML(g, built)
		g.Expect(exported).To(HaveLen(len(want)), tc.dir)
		for key, obj := range want {
			g.Expect(exported).To(HaveKey(key), tc.dir)
			g.Expect(exported[key].Object).To(Equal(withImage(g, obj, image).Object), tc.dir+": "+key)
		}
	}

	// What it prints installs on a new cluster with kubectl.
	c := startEmptyCluster(t)
	res := uprev(t, "install", "--export", "--version", "v1.2.3")
	g.Expect(res.code).To(Equal(0), res.stderr)
	out, err := kubectl(t, c.kubeconfig, []byte(res.stdout), "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("namespace/uprev-system created"))
	g.Expect(out).To(ContainSubstring("customresourcedefinition.apiextensions.k8s.io/syncs.uprev.dev created"))
	g.Expect(out).To(ContainSubstring("deployment.apps/uprev created"))
	var dep appsv1.Deployment
	g.Expect(c.k8s.Get(t.Context(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: "uprev"}, &dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal("ghcr.io/uprev-dev/uprev:v1.2.3"))
}

func TestInstallRefusesADevelopmentBuildWithoutVersion(t *testing.T) {
	g := NewWithT(t)
	res := uprev(t, "install", "--export")
	g.Expect(res.code).To(Equal(1))
	g.Expect(res.stdout).To(BeEmpty())
	g.Expect(res.stderr).To(ContainSubstring("uprev install: this uprev is a development build"))
	g.Expect(res.stderr).To(ContainSubstring("give --version (such as v0.1.0), or --image with a tag"))
}

// installAndMarkAvailable runs `uprev install args...` on c while playing
// the deployment controller: once the Deployment exists, it is marked
// available, as a running cluster would once the Pod is ready.
func installAndMarkAvailable(t *testing.T, c *emptyCluster, args ...string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() { done <- uprev(t, append([]string{"install", "--kubeconfig=" + c.kubeconfig}, args...)...) }()
	ctx := context.Background()
	for {
		select {
		case res := <-done:
			return res
		case <-time.After(100 * time.Millisecond):
			_ = cluster.MarkDeploymentAvailable(ctx, c.k8s, install.DefaultNamespace, "uprev")
		}
	}
}
