// Package demo is `make demo`: it starts a real control plane, an
// in-process OCI registry, a Git server and the uprev manager, applies the
// getting-started example, pushes a newer tag and shows it flow through:
// the policy moves, uprev commits the new version to Git, and the Sync
// changes the Deployment in the cluster. It runs in `make test` too, so the
// demo never rots.
package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

const exampleDir = "../../examples/getting-started"

// say prints one step of the demo.
func say(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

func TestDemo(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()

	say("Starting a control plane (kube-apiserver + etcd), an OCI registry, a Git server and the uprev manager")
	c := cluster.StartT(t)
	reg := registry.Start(t)
	git := gitserver.Start(t)
	k8s := startManager(t, c)
	fleet := exampleRepo(t, reg.Host())
	gitURL := git.InitRepo(t, "fleet", "main", fleet)
	say("Git repository %s holds examples/getting-started/fleet", gitURL)
	placeholders := strings.NewReplacer("registry.example.com", reg.Host(), "http://git.example.com/fleet.git", gitURL)

	for _, tag := range []string{"1.0.0", "1.1.0", "2.0.0-rc.1"} {
		reg.PushImage(t, "acme/agent", tag)
	}
	say("Registry %s holds acme/agent: 1.0.0, 1.1.0, 2.0.0-rc.1", reg.Host())

	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "uprev-demo"}})).To(Succeed())
	repo := &imagev1.ImageRepository{}
	pol := &imagev1.ImagePolicy{}
	applyExample(t, k8s, "imagerepository.yaml", placeholders, repo)
	applyExample(t, k8s, "imagepolicy.yaml", placeholders, pol)
	applyExample(t, k8s, "updateautomation.yaml", placeholders, &uprevv1.UpdateAutomation{})
	applyExample(t, k8s, "sync.yaml", placeholders, &uprevv1.Sync{})
	say("Applied examples/getting-started: ImageRepository, ImagePolicy (semver >=1.0.0 <2.0.0), UpdateAutomation, Sync")

	first := waitForTag(t, k8s, pol, "1.1.0")
	say("ImagePolicy agent selects %s", first)
	waitForImage(t, k8s, first)
	say("uprev committed it to Git:\n%s", git.Git(t, "fleet", "log", "-1", "--stat", "main"))
	say("The Sync applied it: Deployment default/agent runs %s", first)

	digest := reg.PushImage(t, "acme/agent", "1.2.0")
	say("Pushed acme/agent:1.2.0 (%s)", digest)
	requestReconcile(t, k8s, repo)

	second := waitForTag(t, k8s, pol, "1.2.0")
	say("ImagePolicy agent moved: %s --> %s", first, second)
	g.Expect(second).To(HaveSuffix("@" + digest))

	waitForImage(t, k8s, second)
	say("uprev committed the new version:\n%s", git.Git(t, "fleet", "log", "-1", "--format=commit %H%nAuthor: %an <%ae>%n%n%B", "--stat", "main"))
	say("The Sync changed the Deployment: default/agent now runs %s", second)
	g.Expect(git.Log(t, "fleet", "main")).To(HaveLen(3), "the initial commit and one uprev commit per version")
}

// exampleRepo reads examples/getting-started/fleet as the files of the
// demo's Git repository, pointing its images at the demo registry.
func exampleRepo(t *testing.T, registryHost string) map[string]string {
	t.Helper()
	files := map[string]string{}
	root := filepath.Join(exampleDir, "fleet")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = strings.ReplaceAll(string(data), "registry.example.com", registryHost)
		return nil
	})
	if err != nil {
		t.Fatalf("reading the example repository: %v", err)
	}
	return files
}

// waitForImage waits until the Deployment in the cluster runs image.
func waitForImage(t *testing.T, k8s client.Client, image string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(k8s.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "agent"}, &d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// startManager runs the uprev manager with every controller against c.
func startManager(t *testing.T, c *cluster.Cluster) client.Client {
	t.Helper()
	scheme, err := controllers.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	ctrl.SetLogger(logrDiscard())
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts := controllers.Options{Controllers: controllers.AllControllers, StoragePath: t.TempDir(), Concurrency: 2}
	if err := controllers.Setup(ctx, mgr, opts); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return mgr.GetClient()
}

// applyExample creates the object of an example file, with the registry
// and Git placeholders replaced by the demo's servers.
func applyExample(t *testing.T, k8s client.Client, file string, placeholders *strings.Replacer, obj client.Object) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(exampleDir, file))
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(placeholders.Replace(string(data)))
	if err := yaml.Unmarshal(data, obj); err != nil {
		t.Fatalf("reading %s: %v", file, err)
	}
	if err := k8s.Create(t.Context(), obj); err != nil {
		t.Fatalf("applying %s: %v", file, err)
	}
}

// waitForTag waits until the policy selects tag and returns its latest ref.
func waitForTag(t *testing.T, k8s client.Client, pol *imagev1.ImagePolicy, tag string) string {
	t.Helper()
	var ref string
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k8s.Get(t.Context(), client.ObjectKeyFromObject(pol), pol)).To(Succeed())
		g.Expect(pol.Status.LatestRef).NotTo(BeNil())
		g.Expect(pol.Status.LatestRef.Tag).To(Equal(tag))
		ref = pol.Status.LatestRef.String()
	}).WithTimeout(time.Minute).Should(Succeed())
	return ref
}

// requestReconcile asks for a scan now, as `flux reconcile image repository` does.
func requestReconcile(t *testing.T, k8s client.Client, obj client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		obj.SetAnnotations(map[string]string{meta.ReconcileRequestAnnotation: time.Now().Format(time.RFC3339Nano)})
		return k8s.Update(t.Context(), obj)
	}).Should(Succeed())
}
