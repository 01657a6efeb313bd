package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// labelSecret sets (or, with an empty value, removes) labels on the
// Secret ns/name.
func labelSecret(t testing.TB, ns, name string, labels map[string]string) {
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

// deadKubeConfig reaches an API server that is not there: a closed port.
var deadKubeConfig = []byte(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: admin, user: {token: not-a-real-token}}]
contexts: [{name: gone, context: {cluster: gone, user: admin}}]
current-context: gone
`)

// selectedSecret creates a kubeconfig Secret labelled fleet=prod.
func selectedSecret(t *testing.T, ns, name string, kubeconfig []byte) {
	t.Helper()
	kubeConfigSecret(t, ns, name, kubeconfig)
	labelSecret(t, ns, name, map[string]string{"fleet": "prod"})
}

// byLabel selects the Secrets labelled fleet=prod.
func byLabel(s *uprevv1.Sync) {
	s.Spec.Targets = []uprevv1.Target{{Selector: &uprevv1.TargetSelector{MatchLabels: map[string]string{"fleet": "prod"}}}}
}

// TestSyncStepsApplyInOrderWithTheHealthGate: steps of one target, then
// 50%, then all, each waiting for the earlier ones to be healthy.
func TestSyncStepsApplyInOrderWithTheHealthGate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, rc := twoRemoteTargets(t)
	for name, kc := range map[string][]byte{"t1": rc.euKC, "t2": rc.usKC, "t3": rc.euKC, "t4": rc.usKC} {
		selectedSecret(t, ns, name, kc)
	}
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/web.yaml": deployment(ns, "web", "ghcr.io/acme/web:1.0.0")})
	first := srv.Log(t, "fleet", "main")[0].SHA
	s := newSync(t, ns, url, "app", byLabel, func(s *uprevv1.Sync) {
		s.Spec.Wait = true
		s.Spec.Timeout = &metav1.Duration{Duration: time.Minute}
		s.Spec.Rollout = &uprevv1.Rollout{Steps: []uprevv1.RolloutStep{{Count: ptr.To(1)}, {Percent: ptr.To(50)}, {Percent: ptr.To(100)}}}
	})

	// Step 1 is t1 (eu); t2 (us) is in step 2 and waits for t1's health.
	g.Eventually(func(g Gomega) {
		g.Expect(rc.euC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})).To(Succeed())
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		err := rc.usC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "step 2 waits for step 1 to be healthy")
	}).WithTimeout(2 * time.Second).Should(Succeed())

	g.Eventually(func() error { return cluster.MarkDeploymentAvailable(ctx, rc.euC, ns, "web") }).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(rc.usC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func() error { return cluster.MarkDeploymentAvailable(ctx, rc.usC, ns, "web") }).Should(Succeed())
	waitApplied(t, s, first, "t1", "t2", "t3", "t4")
	rev := "main@sha1:" + first
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, s).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(s.Status.Steps).To(Equal([]uprevv1.StepStatus{
			{Revision: rev, Targets: 1, OnRevision: 1, Healthy: 1},
			{Revision: rev, Targets: 1, OnRevision: 1, Healthy: 1},
			{Revision: rev, Targets: 2, OnRevision: 2, Healthy: 2},
		}))
	}).Should(Succeed())
	// t1 got the revision before t2, t2 before t3 and t4.
	getSync(g, s)
	at := func(name string) time.Time { return s.Status.Target(name).LastAppliedTime.Time }
	g.Expect(at("t1")).To(BeTemporally("<=", at("t2")))
	g.Expect(at("t2")).To(BeTemporally("<=", at("t3")))
}

// TestSyncMaxFailuresStopsTheRollout: failures up to maxFailures let the
// rollout go on; one more stops it, with reason RolloutStopped, before the
// later steps.
func TestSyncMaxFailuresStopsTheRollout(t *testing.T) {
	g := NewWithT(t)
	ns, rc := twoRemoteTargets(t)
	selectedSecret(t, ns, "a-bad-1", deadKubeConfig)
	selectedSecret(t, ns, "b-bad-2", deadKubeConfig)
	selectedSecret(t, ns, "c-good", rc.euKC)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	first := srv.Log(t, "fleet", "main")[0].SHA
	s := newSync(t, ns, url, "app", byLabel, func(s *uprevv1.Sync) {
		s.Spec.Rollout = &uprevv1.Rollout{
			Steps:       []uprevv1.RolloutStep{{Count: ptr.To(1)}, {Count: ptr.To(2)}, {Percent: ptr.To(100)}},
			MaxFailures: ptr.To(intstr.FromInt32(1)),
		}
	})
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, s)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.RolloutStoppedReason))
		g.Expect(c.Message).To(ContainSubstring("stopped at step 2 of 3: 2 of 3 targets failed"))
		g.Expect(recordNames(g, s)).To(ConsistOf("a-bad-1", "b-bad-2"), "step 3 never starts")
	}).Should(Succeed())
	g.Expect(configMapExists(g, rc.euC, ns, "settings")).To(BeFalse())

	// One failure is tolerated: with b-bad-2 fixed, the rollout goes on to
	// the last step and c-good gets the revision; a-bad-1 keeps the Sync
	// from Ready.
	var secret corev1.Secret
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "b-bad-2"}, &secret)).To(Succeed())
	secret.Data[kubeConfigKey] = rc.usKC
	g.Expect(k8s.Update(context.Background(), &secret)).To(Succeed())
	requestReconcile(t, s)
	waitApplied(t, s, first, "b-bad-2", "c-good")
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, s)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.ApplyFailedReason))
		g.Expect(c.Message).To(ContainSubstring("a-bad-1"))
	}).Should(Succeed())
}

// TestSyncSelectedKubeConfigIsCheckedLikeANamedOne: a tenant labels a
// Secret whose kubeconfig runs a plugin so that a Sync selects it; the
// Sync refuses it as it refuses a named one, and applies nothing.
func TestSyncSelectedKubeConfigIsCheckedLikeANamedOne(t *testing.T) {
	g := NewWithT(t)
	ns, rc := twoRemoteTargets(t)
	selectedSecret(t, ns, "eu-ok", rc.euKC)
	selectedSecret(t, ns, "evil", []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "touch /tmp/pwned"]}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`))
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	s := newSync(t, ns, url, "app", byLabel)
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, s)
		g.Expect(c.Reason).To(Equal(uprevv1.KubeConfigRefusedReason))
		g.Expect(c.Message).To(ContainSubstring("evil"))
		g.Expect(c.Message).To(ContainSubstring(`users["u"].exec`))
	}).Should(Succeed())
	g.Expect(configMapExists(g, rc.euC, ns, "settings")).To(BeFalse(), "nothing of the revision is applied to any target")
}
