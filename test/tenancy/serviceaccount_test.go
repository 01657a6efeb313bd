package tenancy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// tenantAccount creates the service account tenant in ns, allowed to
// manage ConfigMaps in ns only: the RBAC docs/security.md asks of a tenant.
func tenantAccount(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-apply"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-apply"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant-apply"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}},
	})).To(Succeed())
}

func TestTenantSyncCannotWriteOutsideItsNamespace(t *testing.T) {
	g := NewWithT(t)
	startManager(t, "--controllers=sync", "--default-service-account=tenant")
	team, other := newNamespace(t, "team-a"), newNamespace(t, "team-b")
	tenantAccount(t, team)

	git := gitserver.Start(t)
	url := git.InitRepo(t, "apps", "main", map[string]string{
		"mine.yaml":   configMap(team, "mine"),
		"theirs.yaml": configMap(other, "theirs"),
	})
	s := newSync(t, team, url, localTarget())
	conds := func() []metav1.Condition { return s.Status.Conditions }

	g.Eventually(readyCondition(s, conds)).Should(And(
		HaveField("Status", metav1.ConditionFalse),
		HaveField("Message", And(ContainSubstring("ConfigMap/"+other+"/theirs"), ContainSubstring("forbidden")))))
	g.Expect(exists(g, &corev1.ConfigMap{}, team, "mine")).To(BeFalse(), "a revision is applied whole or not at all")
	g.Expect(exists(g, &corev1.ConfigMap{}, other, "theirs")).To(BeFalse())

	git.CommitFile(t, "apps", "main", "theirs.yaml", configMap(team, "theirs"), "Keep to our namespace")
	requestReconcile(t, s)
	g.Eventually(readyCondition(s, conds)).Should(HaveField("Status", metav1.ConditionTrue))
	g.Expect(exists(g, &corev1.ConfigMap{}, team, "mine")).To(BeTrue())
	g.Expect(exists(g, &corev1.ConfigMap{}, team, "theirs")).To(BeTrue())
	g.Expect(exists(g, &corev1.ConfigMap{}, other, "theirs")).To(BeFalse())
}
