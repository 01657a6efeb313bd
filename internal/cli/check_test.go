package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/leaderelection"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/install"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// uprevCRDs are the CRDs `uprev install` installs.
var uprevCRDs = []string{
	"imagepolicies.image.toolkit.fluxcd.io", "imagerepositories.image.toolkit.fluxcd.io", "imageupdateautomations.image.toolkit.fluxcd.io",
	"releasegates.uprev.dev", "releasesources.uprev.dev", "syncs.uprev.dev", "synctargets.uprev.dev", "updateautomations.uprev.dev",
}

// TestInstallAndCheck installs uprev on a new cluster with `uprev install`
// and checks it with `uprev check`, playing the part of the controllers
// and kubelets that envtest does not run: the Deployment's status, the
// manager's leader Lease and the Services' EndpointSlices are written as a
// running cluster writes them, and each check is seen to fail without them.
func TestInstallAndCheck(t *testing.T) {
	c := startEmptyCluster(t)
	ctx := context.Background()
	kubeconfig := "--kubeconfig=" + c.kubeconfig
	check := func(args ...string) result { return uprev(t, append([]string{"check", kubeconfig}, args...)...) }

	t.Run("PreOnANewCluster", func(t *testing.T) {
		g := NewWithT(t)
		res := check("--pre")
		g.Expect(res.code).To(Equal(0), res.stderr)
		g.Expect(res.stderr).To(MatchRegexp(`(?m)^► checking prerequisites\n✔ Kubernetes 1\.\d+\.\d+ >=1\.29\.0\n✔ you may create and patch namespaces, customresourcedefinitions\.apiextensions\.k8s\.io, .*\n✔ prerequisites checks passed\n$`))
	})

	t.Run("PreWithoutRights", func(t *testing.T) {
		g := NewWithT(t)
		res := check("--pre", "--as=nobody")
		g.Expect(res.code).To(Equal(1))
		g.Expect(res.stderr).To(ContainSubstring("✔ Kubernetes 1."))
		g.Expect(res.stderr).To(ContainSubstring("✗ you may not create or patch customresourcedefinitions.apiextensions.k8s.io cluster-wide, which uprev install applies\n"))
		g.Expect(res.stderr).To(ContainSubstring("✗ you may not create or patch clusterroles.rbac.authorization.k8s.io cluster-wide, which uprev install applies\n"))
		g.Expect(res.stderr).To(ContainSubstring("✗ you may not create or patch deployments.apps in namespace uprev-system, which uprev install applies\n"))
		g.Expect(res.stderr).To(HaveSuffix("✗ prerequisites checks failed\n"))
		g.Expect(res.stderr).NotTo(ContainSubstring("✔ you may"))
	})

	t.Run("BeforeInstall", func(t *testing.T) {
		g := NewWithT(t)
		res := check()
		g.Expect(res.code).To(Equal(1))
		g.Expect(res.stderr).To(ContainSubstring(`✗ deployment uprev-system/uprev: deployments.apps "uprev" not found`))
		g.Expect(res.stderr).To(ContainSubstring("✗ service uprev-system/uprev-metrics: not found\n"))
		for _, crd := range uprevCRDs {
			g.Expect(res.stderr).To(ContainSubstring("✗ " + crd + ": not installed\n"))
		}
		g.Expect(res.stderr).To(HaveSuffix("✗ check failed\n"))
	})

	t.Run("InstallTimesOutUntilTheDeploymentIsAvailable", func(t *testing.T) {
		g := NewWithT(t)
		res := uprev(t, "install", kubeconfig, "--version", "v1.2.3", "--timeout", "8s")
		g.Expect(res.code).To(Equal(1))
		g.Expect(res.stderr).To(ContainSubstring("► installing uprev (ghcr.io/uprev-dev/uprev:v1.2.3) in namespace uprev-system\n"))
		g.Expect(res.stderr).To(ContainSubstring("CustomResourceDefinition/syncs.uprev.dev created\n"))
		g.Expect(res.stderr).To(ContainSubstring("Deployment/uprev-system/uprev created\n"))
		g.Expect(res.stderr).To(ContainSubstring("✗ install failed\n"))
		g.Expect(res.stderr).To(ContainSubstring("uprev install: waiting for the install to be ready: timeout waiting for: [Deployment/uprev-system/uprev status: 'InProgress'"))
	})

	t.Run("InstallWaitsForTheDeployment", func(t *testing.T) {
		g := NewWithT(t)
		res := installAndMarkAvailable(t, c, "--version", "v1.2.3", "--timeout", "1m")
		g.Expect(res.code).To(Equal(0), res.stderr)
		g.Expect(res.stderr).To(ContainSubstring("CustomResourceDefinition/syncs.uprev.dev unchanged\n"))
		g.Expect(res.stderr).To(HaveSuffix("✔ uprev is ready\n✔ install finished\n"))
		for _, name := range uprevCRDs {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(crdGVK)
			g.Expect(c.k8s.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			g.Expect(conditions).To(ContainElement(SatisfyAll(HaveKeyWithValue("type", "Established"), HaveKeyWithValue("status", "True"))), name)
			g.Expect(crd.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/part-of", "uprev"))
		}
	})

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: install.DefaultNamespace,
		Name:      leaderelection.GenerateID("uprev", strings.Join(controllers.AllControllers, ","), ""),
	}}

	t.Run("ManagerNotRunning", func(t *testing.T) {
		g := NewWithT(t)
		res := check()
		g.Expect(res.code).To(Equal(1))
		g.Expect(res.stderr).To(ContainSubstring("✔ deployment uprev-system/uprev: Deployment is available. Replicas: 1\n► ghcr.io/uprev-dev/uprev:v1.2.3\n"))
		g.Expect(res.stderr).To(ContainSubstring(`✗ leader election lease uprev-system/` + lease.Name + `: leases.coordination.k8s.io "` + lease.Name + `" not found`))
		g.Expect(res.stderr).To(ContainSubstring("✗ service uprev-system/uprev-metrics: no ready endpoint (is the manager's Pod ready?)\n"))
		for _, crd := range uprevCRDs {
			g.Expect(res.stderr).To(ContainSubstring("✔ " + crd + ": v1"))
		}
	})

	t.Run("StaleLease", func(t *testing.T) {
		g := NewWithT(t)
		lease.Spec = coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("uprev-5d9c7b8f4-x2x7k_0b6f"), LeaseDurationSeconds: ptr.To[int32](35),
			RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-time.Hour))),
		}
		g.Expect(c.k8s.Create(ctx, lease)).To(Succeed())
		res := check()
		g.Expect(res.code).To(Equal(1))
		g.Expect(res.stderr).To(ContainSubstring("✗ leader election lease uprev-system/" + lease.Name + ": held by uprev-5d9c7b8f4-x2x7k_0b6f, but last renewed 60m ago, longer than its 35s\n"))
	})

	t.Run("AllRunning", func(t *testing.T) {
		g := NewWithT(t)
		lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(-3 * time.Second)))
		g.Expect(c.k8s.Update(ctx, lease)).To(Succeed())
		createEndpoints(t, c.k8s, "uprev-metrics", true)
		res := check()
		g.Expect(res.code).To(Equal(0), res.stderr)
		g.Expect(res.stderr).To(ContainSubstring("✔ leader election lease uprev-system/" + lease.Name + ": held by uprev-5d9c7b8f4-x2x7k_0b6f, renewed 3s ago\n"))
		g.Expect(res.stderr).To(ContainSubstring("✔ service uprev-system/uprev-metrics: 1 ready endpoint(s)\n"))
		g.Expect(res.stderr).NotTo(ContainSubstring("✗"))
		g.Expect(res.stderr).To(HaveSuffix("✔ all checks passed\n"))
	})

	t.Run("WebhookService", func(t *testing.T) {
		g := NewWithT(t)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: "uprev-webhook", Labels: map[string]string{"app.kubernetes.io/name": "uprev", "app.kubernetes.io/component": "manager"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http-webhook", Port: 80, TargetPort: intstr.FromString("http-webhook")}}},
		}
		g.Expect(c.k8s.Create(ctx, svc)).To(Succeed())
		createEndpoints(t, c.k8s, "uprev-webhook", false)
		res := check()
		g.Expect(res.code).To(Equal(1))
		g.Expect(res.stderr).To(ContainSubstring("✗ service uprev-system/uprev-webhook: no ready endpoint (is the manager's Pod ready?)\n"))
		createEndpoints(t, c.k8s, "uprev-webhook", true)
		res = check()
		g.Expect(res.code).To(Equal(0), res.stderr)
		g.Expect(res.stderr).To(ContainSubstring("✔ service uprev-system/uprev-webhook: 1 ready endpoint(s)\n"))
	})

	t.Run("DeploymentUnavailable", func(t *testing.T) {
		g := NewWithT(t)
		var dep appsv1.Deployment
		g.Expect(c.k8s.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: "uprev"}, &dep)).To(Succeed())
		dep.Status.ReadyReplicas, dep.Status.AvailableReplicas, dep.Status.UnavailableReplicas = 0, 0, 1
		dep.Status.Conditions[0].Status = corev1.ConditionFalse
		g.Expect(c.k8s.Status().Update(ctx, &dep)).To(Succeed())
		res := check()
		g.Expect(res.code).To(Equal(1))
		g.Expect(res.stderr).To(ContainSubstring("✗ deployment uprev-system/uprev: Available: 0/1 (InProgress)\n"))
		g.Expect(cluster.MarkDeploymentAvailable(ctx, c.k8s, install.DefaultNamespace, "uprev")).To(Succeed())
	})

	t.Run("OldOrMissingCRD", func(t *testing.T) {
		g := NewWithT(t)
		// An older uprev's CRD: another schema.
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(crdGVK)
		g.Expect(c.k8s.Get(ctx, client.ObjectKey{Name: "syncs.uprev.dev"}, crd)).To(Succeed())
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		g.Expect(unstructured.SetNestedField(versions[0].(map[string]any), "A Sync of an older uprev.", "schema", "openAPIV3Schema", "description")).To(Succeed())
		g.Expect(unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")).To(Succeed())
		g.Expect(c.k8s.Update(ctx, crd)).To(Succeed())
		// And one gone.
		gone := &unstructured.Unstructured{}
		gone.SetGroupVersionKind(crdGVK)
		gone.SetName("releasegates.uprev.dev")
		g.Expect(c.k8s.Delete(ctx, gone)).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(c.k8s.Get(ctx, client.ObjectKey{Name: gone.GetName()}, gone))
		}).WithTimeout(30 * time.Second).Should(BeTrue())

		res := check()
		g.Expect(res.code).To(Equal(1))
		g.Expect(res.stderr).To(ContainSubstring("✗ syncs.uprev.dev: the schema of v1alpha1 is not this uprev's: run uprev install to upgrade it\n"))
		g.Expect(res.stderr).To(ContainSubstring("✗ releasegates.uprev.dev: not installed\n"))
		g.Expect(res.stderr).To(ContainSubstring("✔ synctargets.uprev.dev: v1alpha1 (served, storage), current\n"))

		// Installed again, all is current.
		res = uprev(t, "install", kubeconfig, "--version", "v1.2.3", "--wait=false")
		g.Expect(res.code).To(Equal(0), res.stderr)
		g.Expect(res.stderr).To(ContainSubstring("CustomResourceDefinition/syncs.uprev.dev configured\n"))
		g.Expect(res.stderr).To(ContainSubstring("CustomResourceDefinition/releasegates.uprev.dev created\n"))
		res = check()
		g.Expect(res.code).To(Equal(0), res.stderr)
	})
}

// createEndpoints writes an EndpointSlice of the Service name with one
// endpoint, ready or not, as the EndpointSlice controller would.
func createEndpoints(t *testing.T, c client.Client, name string, ready bool) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: install.DefaultNamespace, GenerateName: name + "-",
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
	}
	if err := c.Create(context.Background(), slice); err != nil {
		t.Fatalf("creating the EndpointSlice of %s: %v", name, err)
	}
}

func TestCheckKubernetesVersion(t *testing.T) {
	for _, tc := range []struct {
		version, want string
		failed        bool
	}{
		{"v1.36.4", "✔ Kubernetes 1.36.4 >=1.29.0\n", false},
		{"v1.29.0-eks-1a2b3c", "✔ Kubernetes 1.29.0 >=1.29.0\n", false},
		{"v1.28.15+k3s1", "✗ Kubernetes 1.28.15 <1.29.0: uprev needs 1.29.0 or later (docs/install.md, Supported versions)\n", true},
		{"not-a-version", "✗ Kubernetes version \"not-a-version\": could not parse \"not-a-version\" as version\n", true},
	} {
		g := NewWithT(t)
		var out strings.Builder
		log := &checkLog{w: &out}
		checkKubernetesVersion(log, tc.version)
		g.Expect(out.String()).To(Equal(tc.want), tc.version)
		g.Expect(log.failed).To(Equal(tc.failed), tc.version)
	}
}
