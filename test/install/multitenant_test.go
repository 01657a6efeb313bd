package install

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// tenantOverlay writes the kustomization a platform team writes to add the
// tenant namespace ns (config/multitenant/tenant with the namespace set)
// and returns its directory.
func tenantOverlay(t *testing.T, k *kubectl, ns string) string {
	t.Helper()
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(k.root, "config", "multitenant", "tenant"))
	if err != nil {
		t.Fatal(err)
	}
	data := "namespace: " + ns + "\nresources:\n- " + filepath.ToSlash(base) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMultitenantBindsPerNamespace checks what config/multitenant and a
// tenant namespace of it render: the impersonation and token roles are
// bound in the tenant namespace only, to the manager's ServiceAccount.
func TestMultitenantBindsPerNamespace(t *testing.T) {
	g := NewWithT(t)
	k := newKubectl(t, "")
	kinds := map[string][]string{}
	for _, obj := range k.build("config/multitenant") {
		kinds[obj.GetKind()] = append(kinds[obj.GetKind()], obj.GetName())
	}
	g.Expect(kinds["ClusterRole"]).To(ContainElements("uprev-sync-impersonate", "uprev-workload-identity"))
	// The metrics authentication role (TokenReviews, SubjectAccessReviews)
	// is cluster-scoped by nature and grants nothing of a tenant's.
	g.Expect(kinds["ClusterRoleBinding"]).To(ConsistOf("uprev-manager", "uprev-metrics-auth"), "nothing of a tenant's is bound cluster-wide")

	var bindings []string
	for _, obj := range k.build(tenantOverlay(t, k, "team-a")) {
		g.Expect(obj.GetKind()).To(Equal("RoleBinding"))
		g.Expect(obj.GetNamespace()).To(Equal("team-a"))
		g.Expect(obj.Object["subjects"]).To(ConsistOf(map[string]any{"kind": "ServiceAccount", "name": "uprev", "namespace": namespace}))
		bindings = append(bindings, obj.GetName())
	}
	g.Expect(bindings).To(ConsistOf("uprev-sync-impersonate", "uprev-workload-identity"))
}

// TestInstallMultitenant installs config/multitenant and one tenant
// namespace on a real API server and asks its RBAC authorizer what the
// manager may do: impersonate and request tokens of ServiceAccounts in the
// tenant namespace only, and write nothing that Syncs apply as itself.
func TestInstallMultitenant(t *testing.T) {
	g := NewWithT(t)
	c := cluster.StartT(t)
	k, _ := kubectlOn(t, c)

	k.run("apply", "-k", "config/multitenant")
	k.run("create", "namespace", "team-a")
	k.run("create", "namespace", "team-b")
	out, _ := k.run("apply", "-k", tenantOverlay(t, k, "team-a"))
	g.Expect(out).To(ContainSubstring("rolebinding.rbac.authorization.k8s.io/uprev-sync-impersonate created"))

	cl, err := client.New(c.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	user := "system:serviceaccount:" + namespace + ":uprev"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	for _, tc := range []struct {
		attrs authorizationv1.ResourceAttributes
		allow bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: "team-a", Name: "default"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: "team-a", Name: "default"}, true},
		{authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: "team-b", Name: "default"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: "team-b", Name: "default"}, false},
		{authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: "kube-system", Name: "default"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "apps", Resource: "deployments", Namespace: "team-a"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: "team-a"}, false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups, ResourceAttributes: ptr.To(tc.attrs),
		}}
		g.Expect(cl.Create(t.Context(), sar)).To(Succeed())
		g.Expect(sar.Status.Allowed).To(Equal(tc.allow), "%s %s/%s %s in %q: allowed=%v (%s)",
			tc.attrs.Verb, tc.attrs.Group, tc.attrs.Resource, tc.attrs.Subresource, tc.attrs.Namespace, sar.Status.Allowed, sar.Status.Reason)
	}
	g.Expect(cl.Get(t.Context(), client.ObjectKey{Name: "uprev-sync-impersonate"}, &rbacv1.ClusterRoleBinding{})).NotTo(Succeed())
}
