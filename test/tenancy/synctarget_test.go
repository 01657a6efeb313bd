package tenancy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/fleet"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// syncTargetWriter returns a client of the user tenant, allowed to do
// anything to the SyncTargets of ns (but not to their status
// subresource, which docs/security.md gives no tenant).
func syncTargetWriter(t *testing.T, ns string) client.Client {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(k8s.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "synctarget-writer"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{uprevv1.GroupVersion.Group}, Resources: []string{"synctargets", "syncs"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"},
		}},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "synctarget-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "synctarget-writer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
	})).To(Succeed())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(adminKubeConfig)
	g.Expect(err).NotTo(HaveOccurred())
	cfg.Impersonate.UserName = "tenant"
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// deploymentManifest is a Deployment of one container running image.
func deploymentManifest(ns, name, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
      containers:
      - name: app
        image: %[3]s
`, ns, name, image)
}

// onlyRecord returns the one SyncTarget of ns, read by c.
func onlyRecord(g Gomega, c client.Client, ns string) *uprevv1.SyncTarget {
	var list uprevv1.SyncTargetList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	return &list.Items[0]
}

// forgeStatus makes st say its target runs image:tag, healthy for a year.
func forgeStatus(st *uprevv1.SyncTarget, image, tag string) {
	st.Status.Healthy = true
	st.Status.HealthySince = &metav1.Time{Time: time.Now().Add(-365 * 24 * time.Hour)}
	st.Status.LastAppliedRevision = st.Status.LastAttemptedRevision
	st.Status.Components = []uprevv1.AppliedComponent{{Image: image, Tag: tag}}
	st.Status.Message = ""
}

// fleetJSON runs the uprev binary's `get fleet -o json` in ns.
func fleetJSON(g Gomega, bin, ns string) fleet.Table {
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, "get", "fleet", "-n", ns, "-o", "json", "--kubeconfig", kubeconfigPath)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	g.Expect(cmd.Run()).To(Succeed(), errOut.String())
	var t fleet.Table
	g.Expect(json.Unmarshal(out.Bytes(), &t)).To(Succeed(), out.String())
	return t
}

// TestTenantCannotForgeWhatSyncTargetsReport: a tenant who may write
// SyncTargets (update, patch, delete, create) tries to make the record of
// a staging target say it runs 1.5.0, healthy for a year. The promotion
// gate keeps 1.5.0 waiting and `uprev get fleet` shows 1.4.2, whether the
// tenant writes the record's status, patches the record, or deletes it and
// creates a forged one.
func TestTenantCannotForgeWhatSyncTargetsReport(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t, "--controllers=sync,image")
	bin := manager.Build(t)
	ns := newNamespace(t, "team")
	tenant := syncTargetWriter(t, ns)

	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.4.2", "1.5.0")
	image := reg.Image("acme/agent")
	git := gitserver.Start(t)
	url := git.InitRepo(t, "apps", "main", map[string]string{"agent.yaml": deploymentManifest(ns, "agent", image+":1.4.2")})
	s := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "staging"},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
			Path:     "./",
			Targets:  []uprevv1.Target{localTarget()},
			Prune:    true,
			Wait:     true,
			Timeout:  &metav1.Duration{Duration: 10 * time.Second},
		},
	}
	g.Expect(k8s.Create(ctx, s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(cluster.MarkDeploymentAvailable(ctx, k8s, ns, "agent")).To(Succeed())
		st := onlyRecord(g, k8s, ns)
		g.Expect(st.Status.HealthySince).NotTo(BeNil(), st.Status.Message)
	}).Should(Succeed())

	g.Expect(k8s.Create(ctx, &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "repo"},
		Spec:       imagev1.ImageRepositorySpec{Image: image, Interval: metav1.Duration{Duration: time.Hour}},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: uprevv1.ReleaseGateSpec{
			PolicySelector: metav1.LabelSelector{MatchLabels: map[string]string{"stage": "prod"}},
			Promotion:      &uprevv1.Promotion{Sync: "staging", Targets: []string{"local"}},
		},
	})).To(Succeed())
	pol := &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent", Labels: map[string]string{"stage": "prod"}},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Name: "repo"},
			Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: "1.x"}},
		},
	}
	g.Expect(k8s.Create(ctx, pol)).To(Succeed())

	// What uprev reports: staging runs 1.4.2, so 1.5.0 waits for promotion.
	reportsStaging := func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pol), pol)).To(Succeed())
		g.Expect(pol.Status.LatestRef).NotTo(BeNil())
		g.Expect(pol.Status.LatestRef.Tag).To(Equal("1.4.2"))
		rg := &uprevv1.ReleaseGate{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prod"}, rg)).To(Succeed())
		g.Expect(rg.Status.Policies).To(HaveLen(1))
		g.Expect(rg.Status.Policies[0].Waiting).To(ContainElement(And(HaveField("Tag", "1.5.0"), HaveField("Gate", "promotion"))))
		table := fleetJSON(g, bin, ns)
		g.Expect(table.Rows).To(HaveLen(1))
		g.Expect(table.Rows[0].Cells).To(HaveLen(1))
		g.Expect(table.Rows[0].Cells[0].Running).To(ConsistOf(fleet.Version{Tag: "1.4.2"}))
	}
	g.Eventually(reportsStaging).Should(Succeed())
	// reevaluated asks the policy to select again, and waits until it did.
	reevaluated := func() {
		requestReconcile(t, pol)
		token := pol.GetAnnotations()[meta.ReconcileRequestAnnotation]
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pol), pol)).To(Succeed())
			g.Expect(pol.Status.LastHandledReconcileAt).To(Equal(token))
		}).Should(Succeed())
	}

	// 1. The record, status and all, written through the resource.
	st := onlyRecord(g, tenant, ns)
	forgeStatus(st, image, "1.5.0")
	g.Expect(tenant.Update(ctx, st)).To(Succeed(), "the tenant may write SyncTargets")
	// 2. The status subresource: refused (404 before it existed).
	st = onlyRecord(g, tenant, ns)
	forgeStatus(st, image, "1.5.0")
	g.Expect(tenant.Status().Update(ctx, st)).NotTo(Succeed())
	reevaluated()
	g.Consistently(reportsStaging).WithTimeout(3 * time.Second).Should(Succeed())
	g.Expect(onlyRecord(g, k8s, ns).Status.Components).To(ConsistOf(HaveField("Tag", "1.4.2")))

	// 3. Deleted, and created again with a forged status, owner and all.
	st = onlyRecord(g, tenant, ns)
	g.Expect(tenant.Delete(ctx, st)).To(Succeed())
	forged := &uprevv1.SyncTarget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: st.Name, Labels: st.Labels, OwnerReferences: st.OwnerReferences},
		Spec:       st.Spec,
		Status:     st.Status,
	}
	forgeStatus(forged, image, "1.5.0")
	g.Expect(tenant.Create(ctx, forged)).To(Succeed())
	reevaluated()
	g.Consistently(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pol), pol)).To(Succeed())
		g.Expect(pol.Status.LatestRef).NotTo(BeNil())
		g.Expect(pol.Status.LatestRef.Tag).To(Equal("1.4.2"), "a forged record lets nothing through")
		for _, row := range fleetJSON(g, bin, ns).Rows {
			for _, cell := range row.Cells {
				g.Expect(cell.Running).NotTo(ContainElement(fleet.Version{Tag: "1.5.0"}))
			}
		}
	}).WithTimeout(3 * time.Second).Should(Succeed())
	g.Expect(onlyRecord(g, k8s, ns).Status.Components).NotTo(ContainElement(HaveField("Tag", "1.5.0")))

	// The Sync's next run makes the record its own again.
	requestReconcile(t, s)
	g.Eventually(func(g Gomega) {
		g.Expect(cluster.MarkDeploymentAvailable(ctx, k8s, ns, "agent")).To(Succeed())
		g.Expect(onlyRecord(g, k8s, ns).Status.Components).To(ConsistOf(HaveField("Tag", "1.4.2")))
	}).Should(Succeed())
	g.Eventually(reportsStaging).Should(Succeed())
}

// TestForgedInventoryDeletesNothingOfAnotherNamespace: with the default
// flags (the manager applies and prunes as itself), a record whose
// inventory names another namespace's ConfigMap, as a tenant who could
// write it would forge, gets nothing of that namespace deleted; the
// Sync's own objects that left its revision are still pruned.
func TestForgedInventoryDeletesNothingOfAnotherNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t, "--controllers=sync")
	team, other := newNamespace(t, "team"), newNamespace(t, "victim")
	victim := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "victim"}, Data: map[string]string{"key": "value"}}
	g.Expect(k8s.Create(ctx, victim)).To(Succeed())

	git := gitserver.Start(t)
	url := git.InitRepo(t, "apps", "main", map[string]string{
		"mine.yaml": configMap(team, "mine"),
		"gone.yaml": configMap(team, "gone"),
	})
	s := newSync(t, team, url, localTarget())
	conds := func() []metav1.Condition { return s.Status.Conditions }
	g.Eventually(readyCondition(s, conds)).Should(HaveField("Status", metav1.ConditionTrue))
	g.Expect(exists(g, &corev1.ConfigMap{}, team, "gone")).To(BeTrue())

	// The forged inventory, written as whoever could (the resource, or its
	// status subresource where one exists).
	var list uprevv1.SyncTargetList
	g.Expect(k8s.List(ctx, &list, client.InNamespace(team))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	st := &list.Items[0]
	forged := uprevv1.InventoryEntry{ID: other + "_victim__ConfigMap", Version: "v1"}
	forge := func() {
		if !slices.Contains(st.Status.Inventory, forged) {
			st.Status.Inventory = append(st.Status.Inventory, forged)
		}
	}
	forge()
	g.Expect(k8s.Update(ctx, st)).To(Succeed())
	forge()
	g.Expect(client.IgnoreNotFound(k8s.Status().Update(ctx, st))).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(st), st)).To(Succeed())
	g.Expect(st.Status.Inventory).To(ContainElement(HaveField("ID", other+"_victim__ConfigMap")), "the inventory is forged")

	// A new revision drops gone.yaml: the Sync prunes.
	git.CommitFile(t, "apps", "main", "gone.yaml", configMap(team, "renamed"), "Rename gone")
	requestReconcile(t, s)
	g.Eventually(func(g Gomega) bool { return exists(g, &corev1.ConfigMap{}, team, "gone") }).Should(BeFalse(), "the Sync's own objects are pruned")
	g.Eventually(readyCondition(s, conds)).Should(HaveField("Status", metav1.ConditionTrue))
	g.Consistently(func(g Gomega) bool { return exists(g, &corev1.ConfigMap{}, other, "victim") }).
		WithTimeout(3*time.Second).Should(BeTrue(), "another namespace's ConfigMap is not deleted")
	g.Expect(exists(g, &corev1.ConfigMap{}, team, "mine")).To(BeTrue())
}
