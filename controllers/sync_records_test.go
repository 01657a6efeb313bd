package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// refuseTargetRecords makes the API server of the test cluster refuse, in
// namespace ns, every write that records a Sync target's applied revision
// (as etcd refuses a record that is too large), with a
// ValidatingAdmissionPolicy. It returns once the policy is in force.
func refuseTargetRecords(t *testing.T, ns string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := "refuse-target-records-" + ns
	const probe = "uprev-test-probe"
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{
					{RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create},
						Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
					}},
					{RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
						Rule:       admissionv1.Rule{APIGroups: []string{uprevv1.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{"syncs/status", "synctargets", "synctargets/status"}},
					}},
				},
			},
			Validations: []admissionv1.Validation{
				{Expression: fmt.Sprintf(`request.resource.resource != "configmaps" || !has(object.metadata.labels) || !(%q in object.metadata.labels)`, probe),
					Message: "probe refused: the policy is in force"},
				{Expression: `request.resource.resource != "syncs" || !has(object.status) || !has(object.status.targets) || object.status.targets.all(t, !has(t.lastAppliedRevision))`,
					Message: "too large (test): a target's applied revision may not be recorded"},
				{Expression: `request.resource.resource != "synctargets" || !has(object.status) || !has(object.status.lastAppliedRevision)`,
					Message: "too large (test): a target's applied revision may not be recorded"},
			},
		},
	}
	g.Expect(k8s.Create(ctx, policy)).To(Succeed())
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	g.Expect(k8s.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), binding)
		_ = k8s.Delete(context.Background(), policy)
	})
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-", Labels: map[string]string{probe: "x"}}}
		err := k8s.Create(ctx, cm)
		if err == nil {
			_ = k8s.Delete(ctx, cm)
		}
		g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "the policy is not in force yet: %v", err)
	}).Should(Succeed())
}

// TestSyncIsNeverReadyWhileATargetHasNotRecordedTheRevision: the API
// server refuses to record the target's applied revision (as etcd refuses
// a record too large); the Sync applies, but must not say Ready over a
// target that has not recorded the revision.
func TestSyncIsNeverReadyWhileATargetHasNotRecordedTheRevision(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	refuseTargetRecords(t, ns)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	s := newSync(t, ns, url, "app")

	g.Eventually(func(g Gomega) {
		c := readyCondition(g, s)
		if c.Status == metav1.ConditionTrue {
			StopTrying("Ready=True over a target that has not recorded the revision: " + c.Message).Now()
		}
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.StatusWriteFailedReason))
		g.Expect(c.Message).To(ContainSubstring("local"))
	}).WithTimeout(time.Minute).Should(Succeed())
	// The revision was applied all the same: only its record is missing.
	var cm corev1.ConfigMap
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)).To(Succeed())
}

// TestSyncEventOfManyFailedTargetsIsRecorded: the Ready event of a Sync
// whose many targets fail at once carries their aggregated error, which
// must fit the API server's 1,024-character limit on an event's note.
func TestSyncEventOfManyFailedTargetsIsRecorded(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	s := newSync(t, ns, url, "app", func(s *uprevv1.Sync) {
		s.Spec.Targets = nil
		for i := range 20 {
			name := fmt.Sprintf("cluster-%02d-%s", i, strings.Repeat("x", 40))
			s.Spec.Targets = append(s.Spec.Targets, uprevv1.Target{Name: name, KubeConfig: &uprevv1.KubeConfigReference{SecretRef: metaRef(name)}})
		}
	})
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, s)
		g.Expect(c.Reason).To(Equal(uprevv1.SecretNotFoundReason))
		g.Expect(len(c.Message)).To(BeNumerically(">", 1024), "the test needs a message longer than an event's note may be")
	}).Should(Succeed())
	expectEvent(t, ns, s.Name, uprevv1.SecretNotFoundReason, "cluster-00-")
	var events eventsList
	g.Expect(k8s.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		g.Expect(len(e.Note)).To(BeNumerically("<=", 1024))
	}
}

// syncTargets lists the SyncTargets of the Sync named name in namespace
// ns.
func syncTargets(g Gomega, ns, name string) []uprevv1.SyncTarget {
	var list uprevv1.SyncTargetList
	g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{uprevv1.SyncLabel: uprevv1.SyncLabelValue(name)})).To(Succeed())
	return list.Items
}

// TestSyncMovesTargetsOfAnEarlierLayoutToSyncTargets: a Sync written by an
// uprev that kept targets in status.targets keeps working: each target's
// entry becomes its SyncTarget, with the inventory pruning reads, and the
// list is emptied.
func TestSyncMovesTargetsOfAnEarlierLayoutToSyncTargets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1") + "---\n" + configMap(ns, "extra", "x")})
	s := newSync(t, ns, url, "app")
	waitApplied(t, s, srv.Log(t, "fleet", "main")[0].SHA, "local")

	// As an earlier uprev left it: the target in status.targets, no
	// SyncTarget.
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.Suspend = true
	g.Expect(k8s.Patch(ctx, s, patch)).To(Succeed())
	getSync(g, s)
	legacy := s.Status.Targets
	g.Expect(legacy).To(HaveLen(1))
	g.Expect(legacy[0].Inventory).To(HaveLen(2))
	g.Expect(k8s.DeleteAllOf(ctx, &uprevv1.SyncTarget{}, client.InNamespace(ns))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		s.Status.Targets = legacy
		g.Expect(k8s.Status().Update(ctx, s)).To(Succeed())
	}).Should(Succeed())
	g.Expect(syncTargets(g, ns, s.Name)).To(BeEmpty())

	// The next revision drops extra: it is pruned from the moved inventory.
	second := srv.CommitFile(t, "fleet", "main", "app/config.yaml", configMap(ns, "settings", "v2"), "Drop extra")
	patch = client.MergeFrom(s.DeepCopy())
	s.Spec.Suspend = false
	g.Expect(k8s.Patch(ctx, s, patch)).To(Succeed())
	waitApplied(t, s, second, "local")
	g.Expect(configMapExists(g, k8s, ns, "extra")).To(BeFalse(), "the inventory of status.targets is pruned from")
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		g.Expect(s.Status.Targets).To(BeEmpty(), "status.targets is emptied once moved")
		records := syncTargets(g, ns, s.Name)
		g.Expect(records).To(HaveLen(1))
		g.Expect(records[0].Spec.Target).To(Equal("local"))
		g.Expect(records[0].Status.Inventory).To(HaveLen(1))
	}).Should(Succeed())
}
