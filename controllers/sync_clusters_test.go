package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// capiCluster is a Cluster API Cluster (v1beta2) of ns labelled fleet=prod.
func capiCluster(ns, name string) *unstructured.Unstructured {
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"})
	c.SetNamespace(ns)
	c.SetName(name)
	c.SetLabels(map[string]string{"fleet": "prod"})
	c.Object["spec"] = map[string]any{"controlPlaneEndpoint": map[string]any{"host": name + ".example.com", "port": int64(6443)}}
	return c
}

// createCluster creates a Cluster, its control plane initialized or not,
// as Cluster API reports it.
func createCluster(t *testing.T, c *unstructured.Unstructured, initialized bool) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(k8s.Create(context.Background(), c)).To(Succeed())
	if initialized {
		initializeCluster(t, c)
	}
}

// initializeCluster reports a Cluster's control plane initialized, as
// Cluster API does once its API server answers.
func initializeCluster(t *testing.T, c *unstructured.Unstructured) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(c), c)).To(Succeed())
		c.Object["status"] = map[string]any{"phase": "Provisioned", "initialization": map[string]any{"controlPlaneInitialized": true, "infrastructureProvisioned": true}}
		g.Expect(k8s.Status().Update(context.Background(), c)).To(Succeed())
	}).Should(Succeed())
}

// syncTarget returns the SyncTarget of a Sync's target.
func syncTarget(g Gomega, s *uprevv1.Sync, target string) *uprevv1.SyncTarget {
	for _, st := range syncTargets(g, s.Namespace, s.Name) {
		if st.Spec.Target == target {
			return &st
		}
	}
	g.Expect(target).To(BeEmpty(), "target %s has no SyncTarget", target)
	return nil
}

// TestSyncClusterTargetsJoinWaitAndLeave: a Sync selects Cluster API
// Clusters by label and reaches each through the kubeconfig Secret Cluster
// API writes. A Cluster not provisioned yet waits outside the rollout, its
// SyncTarget saying why, while the others are applied to and the Sync is
// Ready; it joins once its control plane is initialized, at once (the
// Sync's interval is an hour: the Cluster watch starts the run), and so
// does one whose kubeconfig Secret comes last (the Secret watch starts
// it). A deleted Cluster leaves the fleet: its SyncTarget goes, its
// objects stay.
func TestSyncClusterTargetsJoinWaitAndLeave(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, rc := twoRemoteTargets(t)
	kubeConfigSecret(t, ns, "eu-kubeconfig", rc.euKC)
	eu, us, ap := capiCluster(ns, "eu"), capiCluster(ns, "us"), capiCluster(ns, "ap")
	createCluster(t, eu, true)
	createCluster(t, us, false)
	other := capiCluster(ns, "staging")
	other.SetLabels(map[string]string{"fleet": "staging"})
	createCluster(t, other, true)

	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	first := srv.Log(t, "fleet", "main")[0].SHA
	s := newSync(t, ns, url, "app", func(s *uprevv1.Sync) {
		s.Spec.Targets = []uprevv1.Target{{ClusterSelector: &uprevv1.TargetSelector{MatchLabels: map[string]string{"fleet": "prod"}}}}
	})
	waitApplied(t, s, first, "eu")
	g.Eventually(func(g Gomega) {
		g.Expect(recordNames(g, s)).To(ConsistOf("eu", "us"), "staging is not selected")
		st := syncTarget(g, s, "us")
		g.Expect(st.Status.Reason).To(Equal(uprevv1.ClusterNotProvisionedReason))
		g.Expect(st.Status.Message).To(Equal("waiting for Cluster us: its control plane is not initialized yet (phase unknown)"))
		g.Expect(st.Status.LastAttemptedRevision).To(BeEmpty())
		c := readyCondition(g, s)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "a Cluster not provisioned is no failure of the Sync")
		g.Expect(c.Message).To(Equal("applied main@sha1:" + first + " to 1 targets; 1 Clusters not provisioned yet: us"))
	}).Should(Succeed())
	g.Expect(syncTarget(g, s, "eu").Spec.KubeConfig.SecretRef.Name).To(Equal("eu-kubeconfig"))

	// As Cluster API does: the kubeconfig Secret first, then the control
	// plane reported initialized; the watch starts the run.
	kubeConfigSecret(t, ns, "us-kubeconfig", rc.usKC)
	initializeCluster(t, us)
	waitApplied(t, s, first, "eu", "us")
	g.Expect(configMapExists(g, rc.usC, ns, "settings")).To(BeTrue(), "us joined")
	g.Expect(syncTarget(g, s, "us").Status.Reason).To(BeEmpty())

	// Initialized, and no kubeconfig Secret yet.
	createCluster(t, ap, true)
	g.Eventually(func(g Gomega) {
		st := syncTarget(g, s, "ap")
		g.Expect(st.Status.Reason).To(Equal(uprevv1.ClusterNotProvisionedReason))
		g.Expect(st.Status.Message).To(Equal("waiting for Cluster ap: its kubeconfig Secret ap-kubeconfig does not exist yet"))
		g.Expect(readyCondition(g, s).Message).To(HaveSuffix("to 2 targets; 1 Clusters not provisioned yet: ap"))
	}).Should(Succeed())

	// Cluster API writes ap's kubeconfig Secret, labelled with the
	// Cluster's name, after its control plane is initialized: the Secret's
	// creation starts the run at once (it reaches the us cluster, which is
	// what the test has).
	g.Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ap-kubeconfig", Labels: map[string]string{clusterNameLabel: "ap"}},
		Data:       map[string][]byte{kubeConfigKey: rc.usKC},
	})).To(Succeed())
	created := time.Now()
	g.Eventually(func(g Gomega) {
		st := syncTarget(g, s, "ap")
		g.Expect(st.Status.LastAppliedRevision).To(Equal("main@sha1:"+first), "ap: %s", st.Status.Message)
		g.Expect(st.Status.Reason).To(BeEmpty())
	}).WithTimeout(5*time.Second).Should(Succeed(), "applied within 5 s of its kubeconfig Secret")
	t.Logf("ap applied %s after its kubeconfig Secret was created", time.Since(created).Round(time.Millisecond))

	g.Expect(k8s.Delete(ctx, eu)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(recordNames(g, s)).To(ConsistOf("us", "ap"), "eu left the fleet with its Cluster")
		g.Expect(readyCondition(g, s).Message).To(Equal("applied main@sha1:" + first + " to 2 targets"))
	}).Should(Succeed())
	g.Expect(configMapExists(g, rc.euC, ns, "settings")).To(BeTrue(), "a released target keeps its objects")
}

// TestSyncClusterSelectorWithoutClusterAPI: on a cluster without Cluster
// API, a clusterSelector is an error that names the cause; installing
// Cluster API fixes it at the next interval.
func TestSyncClusterSelectorWithoutClusterAPI(t *testing.T) {
	useCluster(t)
	g := NewWithT(t)
	startRemoteClusters(t)
	// The eu cluster has uprev's CRDs and not Cluster API's.
	r := &SyncReconciler{reconciler: reconciler{Client: remoteClusters.euC}}
	s := &uprevv1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fleet"}}
	s.Spec.Targets = []uprevv1.Target{{ClusterSelector: &uprevv1.TargetSelector{MatchLabels: map[string]string{"fleet": "prod"}}}}
	_, err := r.resolveTargets(context.Background(), s)
	var partial *degradedError
	g.Expect(errors.As(err, &partial)).To(BeTrue(), "%v", err)
	g.Expect(partial.reason).To(Equal(uprevv1.InvalidSpecReason))
	g.Expect(err).To(MatchError("a clusterSelector selects Cluster API Clusters, and Cluster API is not installed: the API server serves no Cluster.cluster.x-k8s.io"))
}

// TestControlPlaneInitialized reads both API versions Cluster API serves.
func TestControlPlaneInitialized(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status map[string]any
		want   bool
	}{
		{"v1beta2 initialized", map[string]any{"initialization": map[string]any{"controlPlaneInitialized": true}}, true},
		{"v1beta2 not yet", map[string]any{"phase": "Provisioning", "initialization": map[string]any{"infrastructureProvisioned": true}}, false},
		{"v1beta1 controlPlaneReady", map[string]any{"controlPlaneReady": true}, true},
		{"v1beta1 condition", map[string]any{"conditions": []any{map[string]any{"type": "ControlPlaneInitialized", "status": "True"}}}, true},
		{"v1beta1 condition false", map[string]any{"conditions": []any{map[string]any{"type": "ControlPlaneInitialized", "status": "False"}}}, false},
		{"no status", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := capiCluster("ns", "c")
			if tc.status != nil {
				c.Object["status"] = tc.status
			}
			got, _ := controlPlaneInitialized(c)
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
}

// TestSyncTargetTakesOneOfNameSelectorAndClusterSelector: the API server
// refuses a target that is two of them, or a clusterSelector with a
// kubeConfig.
func TestSyncTargetTakesOneOfNameSelectorAndClusterSelector(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	prod := &uprevv1.TargetSelector{MatchLabels: map[string]string{"fleet": "prod"}}
	for _, target := range []uprevv1.Target{
		{Name: "eu", ClusterSelector: prod},
		{Selector: prod, ClusterSelector: prod},
		{ClusterSelector: prod, KubeConfig: &uprevv1.KubeConfigReference{SecretRef: metaRef("eu")}},
	} {
		s := &uprevv1.Sync{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
			Spec: uprevv1.SyncSpec{
				Interval: metav1.Duration{Duration: time.Hour},
				Git:      uprevv1.GitSource{URL: "https://git.example.com/fleet.git", Ref: uprevv1.GitRef{Branch: "main"}},
				Targets:  []uprevv1.Target{target},
			},
		}
		g.Expect(k8s.Create(context.Background(), s)).To(MatchError(Or(
			ContainSubstring("a target has one of name, selector and clusterSelector"),
			ContainSubstring("kubeConfig goes with a name"))))
	}
}
