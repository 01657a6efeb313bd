package install

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// namespace is where config/default installs the manager.
const namespace = "uprev-system"

// partOf is the label config/default puts on everything it installs.
var partOf = client.MatchingLabels{"app.kubernetes.io/part-of": "uprev"}

// TestInstallDefault installs config/default on a fresh cluster the way users
// do, checks it with server-side dry runs, and checks what it made.
func TestInstallDefault(t *testing.T) {
	g := NewWithT(t)
	c := cluster.StartT(t)
	k, _ := kubectlOn(t, c)

	// On a fresh cluster the server accepts every cluster-scoped object, but
	// cannot admit namespaced ones, even in a dry run, before their
	// Namespace exists: each error must be that one and nothing else.
	_, stderr, err := k.try("apply", "-k", "config/default", "--dry-run=server")
	var kerr *kubectlError
	g.Expect(errors.As(err, &kerr)).To(BeTrue(), "a dry run on a fresh cluster: %v", err)
	g.Expect(stderr).To(ContainSubstring(`namespaces "` + namespace + `" not found`))
	for line := range strings.Lines(stderr) {
		if strings.HasPrefix(line, "Warning: resource customresourcedefinitions/") {
			continue // the test cluster has the CRDs, installed without kubectl
		}
		g.Expect(line).To(MatchRegexp(`^Error from server \(NotFound\): error when creating "config/default": namespaces "` + namespace + `" not found\s*$`))
	}

	out, stderr := k.run("apply", "-k", "config/default")
	g.Expect(stderr).NotTo(ContainSubstring("PodSecurity"))
	g.Expect(out).To(ContainSubstring("namespace/" + namespace + " created"))
	g.Expect(out).To(ContainSubstring("deployment.apps/uprev created"))

	// Installed, the whole set passes a server-side dry run (what an upgrade
	// checks first), and applying it again changes nothing.
	out, stderr = k.run("apply", "-k", "config/default", "--dry-run=server")
	g.Expect(stderr).To(BeEmpty())
	g.Expect(out).To(Equal(sameLines(out, regexp.MustCompile(` unchanged \(server dry run\)$`))), "every object unchanged")
	out, _ = k.run("apply", "-k", "config/default")
	g.Expect(out).To(Equal(sameLines(out, regexp.MustCompile(` unchanged$`))), "every object unchanged")

	// Pull mode is the same install with one change to the Deployment.
	out, _ = k.run("apply", "-k", "config/pull", "--dry-run=server")
	g.Expect(out).To(ContainSubstring("deployment.apps/uprev configured (server dry run)"))
	g.Expect(strings.Count(out, " configured (server dry run)")).To(Equal(1), out)

	// So is the multi-tenant lockdown.
	out, _ = k.run("apply", "-k", "config/multitenant", "--dry-run=server")
	g.Expect(out).To(ContainSubstring("deployment.apps/uprev configured (server dry run)"))
	g.Expect(strings.Count(out, " configured (server dry run)")).To(Equal(1), out)

	// So is the webhook overlay, plus its role and Service.
	out, _ = k.run("apply", "-k", "config/webhook", "--dry-run=server")
	g.Expect(out).To(ContainSubstring("deployment.apps/uprev configured (server dry run)"))
	g.Expect(out).To(ContainSubstring("clusterrole.rbac.authorization.k8s.io/uprev-webhook created (server dry run)"))
	g.Expect(out).To(ContainSubstring("clusterrolebinding.rbac.authorization.k8s.io/uprev-webhook created (server dry run)"))
	g.Expect(out).To(ContainSubstring("service/uprev-webhook created (server dry run)"))

	cl, err := client.New(c.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()

	t.Run("CRDs", func(t *testing.T) {
		g := NewWithT(t)
		crds := &metav1.PartialObjectMetadataList{}
		crds.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"})
		g.Expect(cl.List(ctx, crds, partOf)).To(Succeed())
		var names []string
		for _, crd := range crds.Items {
			names = append(names, crd.Name)
		}
		g.Expect(names).To(ConsistOf(
			"imagerepositories.image.toolkit.fluxcd.io",
			"imagepolicies.image.toolkit.fluxcd.io",
			"imageupdateautomations.image.toolkit.fluxcd.io",
			"updateautomations.uprev.dev",
			"syncs.uprev.dev",
			"synctargets.uprev.dev",
			"releasegates.uprev.dev",
			"releasesources.uprev.dev",
		))
	})

	t.Run("Deployment", func(t *testing.T) {
		g := NewWithT(t)
		var dep appsv1.Deployment
		g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "uprev"}, &dep)).To(Succeed())
		pod := dep.Spec.Template.Spec
		g.Expect(pod.ServiceAccountName).To(Equal("uprev"))
		g.Expect(pod.SecurityContext).To(PointTo(MatchFields(IgnoreExtras, Fields{
			"RunAsNonRoot":   PointTo(BeTrue()),
			"RunAsUser":      PointTo(BeEquivalentTo(65532)),
			"SeccompProfile": PointTo(HaveField("Type", corev1.SeccompProfileTypeRuntimeDefault)),
		})))
		g.Expect(pod.Containers).To(HaveLen(1))
		mgr := pod.Containers[0]
		g.Expect(mgr.Image).To(Equal("ghcr.io/uprev-dev/uprev:v0.1.0"))
		g.Expect(mgr.SecurityContext).To(PointTo(MatchFields(IgnoreExtras, Fields{
			"RunAsNonRoot":             PointTo(BeTrue()),
			"ReadOnlyRootFilesystem":   PointTo(BeTrue()),
			"AllowPrivilegeEscalation": PointTo(BeFalse()),
			"Capabilities":             PointTo(HaveField("Drop", ConsistOf(corev1.Capability("ALL")))),
			"SeccompProfile":           PointTo(HaveField("Type", corev1.SeccompProfileTypeRuntimeDefault)),
		})))
		g.Expect(mgr.Args).To(ContainElements("--enable-leader-election", "--storage-path=/data", "--metrics-addr=:8443", "--metrics-secure",
			"--controllers="+strings.Join(controllers.AllControllers, ",")))
		g.Expect(mgr.Resources.Requests).To(HaveKey(corev1.ResourceCPU))
		g.Expect(mgr.Resources.Requests).To(HaveKey(corev1.ResourceMemory))
		g.Expect(mgr.Resources.Limits).To(HaveKey(corev1.ResourceCPU))
		g.Expect(mgr.Resources.Limits).To(HaveKey(corev1.ResourceMemory))
		g.Expect(mgr.LivenessProbe).To(PointTo(HaveField("HTTPGet", PointTo(MatchFields(IgnoreExtras, Fields{
			"Path": Equal("/healthz"), "Port": Equal(intstr.FromString("healthz")),
		})))))
		g.Expect(mgr.ReadinessProbe).To(PointTo(HaveField("HTTPGet", PointTo(MatchFields(IgnoreExtras, Fields{
			"Path": Equal("/readyz"), "Port": Equal(intstr.FromString("healthz")),
		})))))
		g.Expect(mgr.Ports).To(ContainElements(
			corev1.ContainerPort{Name: "https-metrics", ContainerPort: 8443, Protocol: corev1.ProtocolTCP},
			corev1.ContainerPort{Name: "healthz", ContainerPort: 9440, Protocol: corev1.ProtocolTCP},
		))
		g.Expect(mgr.VolumeMounts).To(ContainElements(
			HaveField("MountPath", "/data"), HaveField("MountPath", "/tmp")))
	})

	t.Run("ServiceAccountAndRoles", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "uprev"}, &corev1.ServiceAccount{})).To(Succeed())
		for _, name := range []string{"uprev-manager", "uprev-sync-apply", "uprev-sync-impersonate", "uprev-metrics-auth"} {
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRole{})).To(Succeed(), "ClusterRole %s", name)
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRoleBinding{})).To(Succeed(), "ClusterRoleBinding %s", name)
		}
		g.Expect(cl.Get(ctx, client.ObjectKey{Name: "uprev-metrics-reader"}, &rbacv1.ClusterRole{})).To(Succeed(), "for the scraper to bind")
		g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "uprev-leader-election"}, &rbacv1.Role{})).To(Succeed())
		g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "uprev-leader-election"}, &rbacv1.RoleBinding{})).To(Succeed())
	})

	t.Run("MetricsService", func(t *testing.T) {
		g := NewWithT(t)
		var svc corev1.Service
		g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "uprev-metrics"}, &svc)).To(Succeed())
		g.Expect(svc.Spec.Ports).To(ConsistOf(MatchFields(IgnoreExtras, Fields{
			"Port": BeEquivalentTo(8443), "TargetPort": Equal(intstr.FromString("https-metrics")),
		})))
		g.Expect(svc.Spec.Selector).To(Equal(map[string]string{
			"app.kubernetes.io/name": "uprev", "app.kubernetes.io/component": "manager",
		}))
	})

	// What the installed ServiceAccount may do, as the API server's RBAC
	// authorizer decides it.
	t.Run("Permissions", func(t *testing.T) {
		g := NewWithT(t)
		user := "system:serviceaccount:" + namespace + ":uprev"
		groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
		for _, tc := range []struct {
			attrs authorizationv1.ResourceAttributes
			allow bool
		}{
			// Scanning.
			{authorizationv1.ResourceAttributes{Verb: "watch", Group: "image.toolkit.fluxcd.io", Resource: "imagerepositories"}, true},
			{authorizationv1.ResourceAttributes{Verb: "patch", Group: "image.toolkit.fluxcd.io", Resource: "imagepolicies", Subresource: "status", Namespace: "team-a"}, true},
			{authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "team-a"}, true},
			{authorizationv1.ResourceAttributes{Verb: "get", Resource: "serviceaccounts", Namespace: "team-a"}, true},
			// Write-back.
			{authorizationv1.ResourceAttributes{Verb: "list", Group: "uprev.dev", Resource: "updateautomations"}, true},
			{authorizationv1.ResourceAttributes{Verb: "update", Group: "uprev.dev", Resource: "updateautomations", Subresource: "status", Namespace: "team-a"}, true},
			{authorizationv1.ResourceAttributes{Verb: "create", Group: "events.k8s.io", Resource: "events", Namespace: "team-a"}, true},
			// Apply: its own objects (their finalizers too), and impersonation.
			{authorizationv1.ResourceAttributes{Verb: "patch", Group: "uprev.dev", Resource: "syncs", Namespace: "team-a"}, true},
			{authorizationv1.ResourceAttributes{Verb: "patch", Group: "uprev.dev", Resource: "syncs", Subresource: "status", Namespace: "team-a"}, true},
			{authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: "team-a", Name: "deployer"}, true},
			// Leader election, in uprev's namespace only.
			{authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: namespace}, true},
			{authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system"}, false},
			// Serving the metrics to authorized clients only (--metrics-secure).
			{authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, true},
			{authorizationv1.ResourceAttributes{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, true},
			// Never: changing Secrets or deleting what users write.
			{authorizationv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: "team-a"}, false},
			{authorizationv1.ResourceAttributes{Verb: "delete", Resource: "secrets", Namespace: namespace}, false},
			{authorizationv1.ResourceAttributes{Verb: "delete", Group: "uprev.dev", Resource: "syncs", Namespace: "team-a"}, false},
			{authorizationv1.ResourceAttributes{Verb: "delete", Group: "image.toolkit.fluxcd.io", Resource: "imagepolicies", Namespace: "team-a"}, false},
			{authorizationv1.ResourceAttributes{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, false},
			{authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users"}, false},
			// Until the user grants uprev-sync-apply something, the apply
			// loop cannot write workloads in the local cluster as itself.
			{authorizationv1.ResourceAttributes{Verb: "create", Group: "apps", Resource: "deployments", Namespace: "team-a"}, false},
		} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: groups, ResourceAttributes: ptr.To(tc.attrs),
			}}
			g.Expect(cl.Create(ctx, sar)).To(Succeed())
			g.Expect(sar.Status.Allowed).To(Equal(tc.allow), "%s %s/%s %s in %q: allowed=%v (%s)",
				tc.attrs.Verb, tc.attrs.Group, tc.attrs.Resource, tc.attrs.Subresource, tc.attrs.Namespace, sar.Status.Allowed, sar.Status.Reason)
		}
	})

	// The quickstart on kind or k3d, but for the container runtime.
	t.Run("ManagerRunsAsThePod", func(t *testing.T) { managerRunsAsThePod(t, c, withScheme(t, c)) })
}

// sameLines returns the lines of out that match re, joined as out is, so
// that comparing with out shows the lines that do not.
func sameLines(out string, re *regexp.Regexp) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		if re.MatchString(strings.TrimRight(line, "\n")) {
			b.WriteString(line)
		}
	}
	return b.String()
}
