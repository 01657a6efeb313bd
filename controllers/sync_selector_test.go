package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// labelSecret sets (or, with an empty value, removes) labels on the
// Secret ns/name.
func labelSecret(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var secret corev1.Secret
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &secret)).To(Succeed())
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		for k, v := range labels {
			if v == "" {
				delete(secret.Labels, k)
			} else {
				secret.Labels[k] = v
			}
		}
		g.Expect(k8s.Update(context.Background(), &secret)).To(Succeed())
	}).Should(Succeed())
}

// recordNames returns the target names of a Sync's SyncTargets.
func recordNames(g Gomega, s *uprevv1.Sync) []string {
	var names []string
	for _, st := range syncTargets(g, s.Namespace, s.Name) {
		names = append(names, st.Spec.Target)
	}
	return names
}

// TestSyncSelectedTargetsJoinAndLeave: a Sync selects kubeconfig Secrets
// by label. A Secret that gains the label is applied to, under the name
// its uprev.dev/target-name label gives; one that loses it is released:
// its record goes, its objects stay.
func TestSyncSelectedTargetsJoinAndLeave(t *testing.T) {
	g := NewWithT(t)
	ns, rc := twoRemoteTargets(t)
	labelSecret(t, ns, "eu-1", map[string]string{"fleet": "prod"})
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	first := srv.Log(t, "fleet", "main")[0].SHA
	s := newSync(t, ns, url, "app", func(s *uprevv1.Sync) {
		s.Spec.Targets = []uprevv1.Target{{Selector: &uprevv1.TargetSelector{MatchLabels: map[string]string{"fleet": "prod"}}}}
	})
	waitApplied(t, s, first, "eu-1")
	g.Expect(configMapExists(g, rc.usC, ns, "settings")).To(BeFalse(), "us-1 is not selected")

	labelSecret(t, ns, "us-1", map[string]string{"fleet": "prod", uprevv1.TargetNameLabel: "us-east"})
	requestReconcile(t, s)
	waitApplied(t, s, first, "eu-1", "us-east")
	g.Expect(configMapExists(g, rc.usC, ns, "settings")).To(BeTrue(), "us-1 joined as us-east")

	labelSecret(t, ns, "eu-1", map[string]string{"fleet": ""})
	requestReconcile(t, s)
	g.Eventually(func(g Gomega) {
		g.Expect(recordNames(g, s)).To(ConsistOf("us-east"), "eu-1 left: its record goes")
		c := readyCondition(g, s)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(HaveSuffix("to 1 targets"))
		g.Expect(s.Status.Steps).To(Equal([]uprevv1.StepStatus{{Revision: "main@sha1:" + first, Targets: 1, OnRevision: 1}}),
			"health is not checked: the Sync does not wait")
	}).Should(Succeed())
	g.Expect(configMapExists(g, rc.euC, ns, "settings")).To(BeTrue(), "a released target keeps its objects")
}
