// Package fluxcli runs the real Flux CLI (bin/flux, built by
// test/flux/build.sh; `make test` builds it) against uprev serving Flux's
// ImageRepository, ImagePolicy and ImageUpdateAutomation, and shows that
// the commands people use on them exit 0 and do what they say.
package fluxcli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/reporoot"
)

// fluxBinary returns the path of bin/flux, failing the test with how to
// build it when it is not there.
func fluxBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(reporoot.Dir(), "bin", "flux")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the Flux CLI is missing at %s: build it with `make flux` or test/flux/build.sh (`make test` builds it): %v", bin, err)
	}
	return bin
}

// cli runs one Flux CLI (or, with uprev set, uprev's) against one
// cluster, in one namespace.
type cli struct {
	bin, kubeconfig, namespace string
	// uprev says bin is uprev's CLI, which takes no --timeout.
	uprev bool
}

// run runs flux with args and returns its combined output and exit code.
func (c cli) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args = append(args, "--namespace="+c.namespace)
	if !c.uprev {
		args = append(args, "--timeout=1m")
	}
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("running flux %v: %v\n%s", args, err, out)
	}
	t.Logf("flux %v:\n%s", args, out)
	return string(out), 0
}

// mustRun runs flux with args and fails the test unless it exits 0.
func (c cli) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, code := c.run(t, args...)
	if code != 0 {
		t.Fatalf("flux %v exited %d:\n%s", args, code, out)
	}
	return out
}

// createFromYAML creates the object that doc describes, as a person
// applying Flux's documented YAML would.
func createFromYAML(t *testing.T, k8s client.Client, doc string) {
	t.Helper()
	var u unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("parsing %s: %v", doc, err)
	}
	if err := k8s.Create(context.Background(), &u); err != nil {
		t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func TestFluxCLIOnImageObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	bin := fluxBinary(t)
	c := manager.StartCluster(t)
	manager.Start(t, manager.Build(t), c.KubeConfigPath, t.TempDir(), "--controllers=image")
	reg := registry.Start(t)
	reg.PushTags(t, "stefanprodan/podinfo", "5.0.0", "5.1.0", "5.1.1", "6.0.0")

	ns := "flux-cli"
	g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	flux := cli{bin: bin, kubeconfig: c.KubeConfigPath, namespace: ns}

	// As Flux's image-reflector docs write them.
	createFromYAML(t, c.Client, `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata:
  name: podinfo
  namespace: `+ns+`
spec:
  image: `+reg.Image("stefanprodan/podinfo")+`
  interval: 1h
  provider: generic
`)
	createFromYAML(t, c.Client, `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata:
  name: podinfo
  namespace: `+ns+`
spec:
  imageRepositoryRef:
    name: podinfo
  policy:
    semver:
      range: 5.1.x
`)
	repoKey := client.ObjectKey{Namespace: ns, Name: "podinfo"}
	repo, pol := &imagev1.ImageRepository{}, &imagev1.ImagePolicy{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, repoKey, pol)).To(Succeed())
		g.Expect(conditions.IsReady(pol)).To(BeTrue())
		g.Expect(pol.Status.LatestRef).NotTo(BeNil())
		g.Expect(pol.Status.LatestRef.Tag).To(Equal("5.1.1"))
	}).WithTimeout(time.Minute).Should(Succeed())

	// getPolicy and getRepo read the objects as they are now, failing the
	// (sub)test of g if they cannot.
	getPolicy := func(g Gomega) *imagev1.ImagePolicy {
		g.Expect(c.Client.Get(ctx, repoKey, pol)).To(Succeed())
		return pol
	}
	getRepo := func(g Gomega) *imagev1.ImageRepository {
		g.Expect(c.Client.Get(ctx, repoKey, repo)).To(Succeed())
		return repo
	}

	t.Run("get", func(t *testing.T) {
		g := NewWithT(t)
		out := flux.mustRun(t, "get", "image", "repository")
		g.Expect(out).To(MatchRegexp(`podinfo\s+\S+\s+False\s+True\s+successful scan: found 4 tags`))
		out = flux.mustRun(t, "get", "image", "policy", "podinfo")
		g.Expect(out).To(MatchRegexp(`podinfo\s+` + reg.Image("stefanprodan/podinfo") + `\s+5\.1\.1\s+True`))
		out = flux.mustRun(t, "get", "images", "all")
		g.Expect(out).To(ContainSubstring("imagerepository/podinfo"))
		g.Expect(out).To(MatchRegexp(`imagepolicy/podinfo\s+\S+\s+5\.1\.1\s+True`))
	})

	t.Run("reconcile", func(t *testing.T) {
		g := NewWithT(t)
		reg.PushTags(t, "stefanprodan/podinfo", "5.1.2")
		// The CLI returns once uprev has handled the request: the new tag
		// is in the scan when it does.
		flux.mustRun(t, "reconcile", "image", "repository", "podinfo")
		getRepo(g)
		g.Expect(repo.Status.LastHandledReconcileAt).NotTo(BeEmpty())
		g.Expect(repo.Status.LastScanResult).NotTo(BeNil())
		g.Expect(repo.Status.LastScanResult.TagCount).To(Equal(5))

		out := flux.mustRun(t, "reconcile", "image", "policy", "podinfo")
		g.Expect(out).To(ContainSubstring("5.1.2"))
		getPolicy(g)
		g.Expect(pol.Status.LastHandledReconcileAt).NotTo(BeEmpty())
		g.Expect(pol.Status.LatestRef.Tag).To(Equal("5.1.2"))
		g.Expect(flux.mustRun(t, "get", "image", "policy", "podinfo")).To(MatchRegexp(`podinfo\s+\S+\s+5\.1\.2\s+True`))
	})

	t.Run("suspend and resume", func(t *testing.T) {
		g := NewWithT(t)
		flux.mustRun(t, "suspend", "image", "repository", "podinfo")
		g.Expect(getRepo(g).Spec.Suspend).To(BeTrue())
		g.Expect(flux.mustRun(t, "get", "image", "repository", "podinfo")).To(MatchRegexp(`podinfo\s+\S+\s+True\s+True`))

		// Resuming waits until uprev has reconciled the new generation and
		// the repository is Ready. As with Flux, that is not a scan: the
		// interval has not passed and no reconcile was requested.
		flux.mustRun(t, "resume", "image", "repository", "podinfo")
		getRepo(g)
		g.Expect(repo.Spec.Suspend).To(BeFalse())
		g.Expect(repo.Status.ObservedGeneration).To(Equal(repo.Generation))
		g.Expect(conditions.IsReady(repo)).To(BeTrue())

		// A suspended policy keeps its tag while the repository finds a
		// newer one, and selects it once resumed.
		flux.mustRun(t, "suspend", "image", "policy", "podinfo")
		g.Expect(getPolicy(g).Spec.Suspend).To(BeTrue())
		reg.PushTags(t, "stefanprodan/podinfo", "5.1.3")
		flux.mustRun(t, "reconcile", "image", "repository", "podinfo")
		g.Expect(getRepo(g).Status.LastScanResult.TagCount).To(Equal(6))
		g.Expect(flux.mustRun(t, "get", "image", "policy", "podinfo")).To(MatchRegexp(`podinfo\s+\S+\s+5\.1\.2\s+True`))

		out := flux.mustRun(t, "resume", "image", "policy", "podinfo")
		g.Expect(out).To(ContainSubstring("5.1.3"))
		getPolicy(g)
		g.Expect(pol.Spec.Suspend).To(BeFalse())
		g.Expect(pol.Status.ObservedGeneration).To(Equal(pol.Generation))
		g.Expect(pol.Status.LatestRef.Tag).To(Equal("5.1.3"))
	})

	// Every object Flux's image-reflector-controller reconciled carries its
	// finalizer; deleted under uprev, it must not stay Terminating.
	t.Run("delete", func(t *testing.T) {
		g := NewWithT(t)
		for _, obj := range []client.Object{getPolicy(g), getRepo(g)} {
			patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
			obj.SetFinalizers(append(obj.GetFinalizers(), imagev1.ImageFinalizer))
			g.Expect(c.Client.Patch(ctx, obj, patch)).To(Succeed())
		}
		g.Expect(flux.mustRun(t, "delete", "image", "policy", "podinfo", "--silent")).To(ContainSubstring("deleted"))
		g.Expect(flux.mustRun(t, "delete", "image", "repository", "podinfo", "--silent")).To(ContainSubstring("deleted"))
		g.Eventually(func(g Gomega) {
			g.Expect(apierrors.IsNotFound(c.Client.Get(ctx, repoKey, &imagev1.ImagePolicy{}))).To(BeTrue(), "the ImagePolicy is gone")
			g.Expect(apierrors.IsNotFound(c.Client.Get(ctx, repoKey, &imagev1.ImageRepository{}))).To(BeTrue(), "the ImageRepository is gone")
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})
}

func TestFluxCLIOnImageUpdateAutomation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	bin := fluxBinary(t)
	c := manager.StartCluster(t)
	uprevBin := manager.Build(t)
	manager.Start(t, uprevBin, c.KubeConfigPath, t.TempDir(), "--controllers=image,automation")
	reg := registry.Start(t)
	reg.PushTags(t, "stefanprodan/podinfo", "5.0.0")
	image := reg.Image("stefanprodan/podinfo")
	git := gitserver.Start(t)
	ns := "flux-system"
	url := git.InitRepo(t, "fleet", "main", map[string]string{
		"clusters/my-cluster/podinfo.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\nspec:\n  template:\n    spec:\n      containers:\n      - name: podinfo\n        image: " + image + ":5.0.0 # {\"$imagepolicy\": \"" + ns + ":podinfo\"}\n",
	})
	g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	flux := cli{bin: bin, kubeconfig: c.KubeConfigPath, namespace: ns}

	// As Flux's docs write them.
	for _, doc := range []string{`apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata:
  name: podinfo
  namespace: flux-system
spec:
  image: ` + image + `
  interval: 1h
`, `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata:
  name: podinfo
  namespace: flux-system
spec:
  imageRepositoryRef:
    name: podinfo
  policy:
    semver:
      range: 5.x
`, `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m0s
  ref:
    branch: main
  url: ` + url + `
`, `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageUpdateAutomation
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1h
  sourceRef:
    kind: GitRepository
    name: flux-system
  git:
    checkout:
      ref:
        branch: main
    commit:
      author:
        email: fluxcdbot@users.noreply.github.com
        name: fluxcdbot
    push:
      branch: main
  update:
    path: ./clusters/my-cluster
    strategy: Setters
`} {
		createFromYAML(t, c.Client, doc)
	}
	key := client.ObjectKey{Namespace: ns, Name: "flux-system"}
	auto := &iacv1.ImageUpdateAutomation{}
	getAuto := func(g Gomega) *iacv1.ImageUpdateAutomation {
		g.Expect(c.Client.Get(ctx, key, auto)).To(Succeed())
		return auto
	}
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsReady(getAuto(g))).To(BeTrue())
	}).WithTimeout(time.Minute).Should(Succeed())

	t.Run("get", func(t *testing.T) {
		g := NewWithT(t)
		out := flux.mustRun(t, "get", "image", "update")
		g.Expect(out).To(MatchRegexp(`flux-system\s+\S+\s+False\s+True\s+no change`))
		out = flux.mustRun(t, "get", "images", "all")
		g.Expect(out).To(MatchRegexp(`imageupdateautomation/flux-system\s+\S+\s+False\s+True`))
		g.Expect(out).To(MatchRegexp(`imagepolicy/podinfo\s+\S+\s+5\.0\.0\s+True`))
	})

	t.Run("reconcile", func(t *testing.T) {
		g := NewWithT(t)
		reg.PushTags(t, "stefanprodan/podinfo", "5.1.0")
		flux.mustRun(t, "reconcile", "image", "repository", "podinfo")
		flux.mustRun(t, "reconcile", "image", "policy", "podinfo")
		// The policy's new tag starts a run by itself; a requested one
		// returns when uprev has handled it, the commit pushed by then.
		out := flux.mustRun(t, "reconcile", "image", "update", "flux-system")
		g.Expect(out).To(MatchRegexp(`✔ (pushed [0-9a-f]{10} to main|no change: nothing new since main@sha1:[0-9a-f]{40})`))
		g.Eventually(func(g Gomega) {
			g.Expect(getAuto(g).Status.LastPushCommit).NotTo(BeEmpty())
		}).Should(Succeed())
		g.Expect(auto.Status.LastHandledReconcileAt).NotTo(BeEmpty())
		g.Expect(git.ReadFile(t, "fleet", "main", "clusters/my-cluster/podinfo.yaml")).To(ContainSubstring(image + ":5.1.0 #"))
	})

	// A person reverts the commit: uprev holds the version, publishes the
	// hold in an annotation that uprev's CLI reads, and Flux's CLI goes on
	// reading the object as before; released with uprev's CLI, the version
	// is written again and the published hold goes.
	t.Run("revert holds", func(t *testing.T) {
		g := NewWithT(t)
		pushed := getAuto(g).Status.LastPushCommit
		git.Revert(t, "fleet", "main", pushed)
		out := flux.mustRun(t, "reconcile", "image", "update", "flux-system")
		g.Expect(out).To(ContainSubstring("1 held"))
		g.Expect(getAuto(g).Annotations).To(HaveKey(uprevv1.HoldsAnnotation))
		g.Expect(flux.mustRun(t, "get", "image", "update")).To(MatchRegexp(`flux-system\s+\S+\s+False\s+True\s+no change.*1 held`))
		uprev := cli{bin: uprevBin, kubeconfig: c.KubeConfigPath, namespace: ns, uprev: true}
		g.Expect(uprev.mustRun(t, "get", "holds")).To(MatchRegexp(`(?m)^flux-system +ImageUpdateAutomation +flux-system/podinfo +5\.1\.0 +[0-9a-f]{10} +False +\(reverted\)$`))

		g.Expect(uprev.mustRun(t, "release-hold", "flux-system")).To(ContainSubstring("imageupdateautomation.image.toolkit.fluxcd.io/flux-system released flux-system/podinfo 5.1.0\n"))
		g.Eventually(func(g Gomega) {
			g.Expect(getAuto(g).Status.LastPushCommit).NotTo(Equal(pushed))
			g.Expect(auto.Annotations).NotTo(HaveKey(uprevv1.HoldsAnnotation))
		}).WithTimeout(time.Minute).Should(Succeed())
		g.Expect(git.ReadFile(t, "fleet", "main", "clusters/my-cluster/podinfo.yaml")).To(ContainSubstring(image + ":5.1.0 #"))
		out, code := uprev.run(t, "get", "holds")
		g.Expect(code).To(Equal(0), out)
		g.Expect(out).To(ContainSubstring("No holds found in namespace flux-system.\n"))
	})

	t.Run("suspend and resume", func(t *testing.T) {
		g := NewWithT(t)
		flux.mustRun(t, "suspend", "image", "update", "flux-system")
		g.Expect(getAuto(g).Spec.Suspend).To(BeTrue())
		g.Expect(flux.mustRun(t, "get", "image", "update")).To(MatchRegexp(`flux-system\s+\S+\s+True\s+True`))
		pushed := auto.Status.LastPushCommit

		// Suspended, a new tag is not written.
		reg.PushTags(t, "stefanprodan/podinfo", "5.2.0")
		flux.mustRun(t, "reconcile", "image", "repository", "podinfo")
		flux.mustRun(t, "reconcile", "image", "policy", "podinfo")
		g.Consistently(func(g Gomega) {
			g.Expect(getAuto(g).Status.LastPushCommit).To(Equal(pushed))
		}, "2s").Should(Succeed())

		// Resumed, it is.
		flux.mustRun(t, "resume", "image", "update", "flux-system")
		g.Expect(getAuto(g).Spec.Suspend).To(BeFalse())
		g.Eventually(func(g Gomega) {
			g.Expect(getAuto(g).Status.LastPushCommit).NotTo(Equal(pushed))
		}).Should(Succeed())
		g.Expect(git.ReadFile(t, "fleet", "main", "clusters/my-cluster/podinfo.yaml")).To(ContainSubstring(image + ":5.2.0 #"))
	})
}

// TestFluxCLIShowsReleaseGates shows that `flux get image policy` tells
// why a policy holds a newer version back: the ReleaseGate's promotion
// waits for the staging Sync to run it.
func TestFluxCLIShowsReleaseGates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	bin := fluxBinary(t)
	c := manager.StartCluster(t)
	manager.Start(t, manager.Build(t), c.KubeConfigPath, t.TempDir(), "--controllers=image,sync")
	reg := registry.Start(t)
	reg.PushTags(t, "stefanprodan/podinfo", "5.0.0", "5.1.0")
	image := reg.Image("stefanprodan/podinfo")
	ns := "gates"
	g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	git := gitserver.Start(t)
	url := git.InitRepo(t, "fleet", "main", map[string]string{"staging/podinfo.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: podinfo, namespace: ` + ns + `}
spec:
  selector: {matchLabels: {app: podinfo}}
  template:
    metadata: {labels: {app: podinfo}}
    spec:
      containers:
      - {name: podinfo, image: "` + image + `:5.0.0"}
`})
	flux := cli{bin: bin, kubeconfig: c.KubeConfigPath, namespace: ns}
	for _, doc := range []string{`apiVersion: uprev.dev/v1alpha1
kind: Sync
metadata: {name: staging, namespace: ` + ns + `}
spec:
  interval: 1h
  git: {url: "` + url + `", ref: {branch: main}}
  path: ./staging
  targets: [{name: eu-staging}]
  wait: true
  timeout: 1m
`, `apiVersion: uprev.dev/v1alpha1
kind: ReleaseGate
metadata: {name: prod, namespace: ` + ns + `}
spec:
  policySelector: {matchLabels: {stage: prod}}
  promotion: {sync: staging, targets: [eu-staging]}
`, `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata: {name: podinfo, namespace: ` + ns + `}
spec:
  image: ` + image + `
  interval: 1h
`, `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata: {name: podinfo, namespace: ` + ns + `, labels: {stage: prod}}
spec:
  imageRepositoryRef: {name: podinfo}
  policy: {semver: {range: 5.x}}
`} {
		createFromYAML(t, c.Client, doc)
	}
	// No kubelet runs here: the test makes the staging Deployment healthy.
	g.Eventually(func() error { return cluster.MarkDeploymentAvailable(ctx, c.Client, ns, "podinfo") }).WithTimeout(time.Minute).Should(Succeed())

	g.Eventually(func(g Gomega) {
		out := flux.mustRun(t, "get", "image", "policy", "podinfo")
		g.Expect(out).To(MatchRegexp(`podinfo\s+` + image + `\s+5\.0\.0\s+True\s+.*5\.1\.0 waits for promotion: eu-staging runs 5\.0\.0 \(ReleaseGate prod\)`))
	}).WithTimeout(time.Minute).Should(Succeed())
}
