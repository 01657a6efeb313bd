package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

func TestSyncAppliesCRDsAndCustomResourcesThenPrunes(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: agents.fleet.example.com
spec:
  group: fleet.example.com
  names: {kind: Agent, plural: agents, singular: agent, listKind: AgentList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`
	agent := fmt.Sprintf("apiVersion: fleet.example.com/v1\nkind: Agent\nmetadata:\n  name: edge\n  namespace: %s\nspec:\n  mode: fast\n", ns)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{
		"clusters/prod/crd.yaml":    crd,
		"clusters/prod/agent.yaml":  agent,
		"clusters/prod/config.yaml": configMap(ns, "settings", "v1") + "---\n" + configMap(ns, "extra", "x"),
		"README.md":                 "not a manifest",
	})
	first := srv.Log(t, "fleet", "main")[0].SHA
	s := newSync(t, ns, url, "clusters/prod")
	waitApplied(t, s, first, "local")

	ctx := context.Background()
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(schema.GroupVersionKind{Group: "fleet.example.com", Version: "v1", Kind: "Agent"})
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edge"}, cr)).To(Succeed())
	// The targets' status is written before the conditions are.
	g.Eventually(func(g Gomega) { g.Expect(readyCondition(g, s).Status).To(Equal(metav1.ConditionTrue)) }).Should(Succeed())
	getSync(g, s)
	g.Expect(s.Status.Targets[0].Inventory).To(HaveLen(4))

	second := srv.CommitFile(t, "fleet", "main", "clusters/prod/config.yaml", configMap(ns, "settings", "v2"), "Drop extra, change settings")
	requestReconcile(t, s)
	waitApplied(t, s, second, "local")
	var cm corev1.ConfigMap
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)).To(Succeed())
	g.Expect(cm.Data["value"]).To(Equal("v2"))
	err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "extra"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "extra left the revision and is pruned")
	g.Expect(s.Status.Targets[0].Inventory).To(HaveLen(3))
	expectEvent(t, ns, s.Name, "Applied", "deleted "+ns+"_extra__ConfigMap")
}

func TestSyncCorrectsDrift(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "from-git")})
	s := newSync(t, ns, url, "app")
	waitApplied(t, s, srv.Log(t, "fleet", "main")[0].SHA, "local")

	ctx := context.Background()
	var cm corev1.ConfigMap
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)).To(Succeed())
	cm.Data["value"] = "edited by hand"
	g.Expect(k8s.Update(ctx, &cm)).To(Succeed())

	requestReconcile(t, s)
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)).To(Succeed())
		g.Expect(cm.Data["value"]).To(Equal("from-git"))
	}).Should(Succeed())
	expectEvent(t, ns, s.Name, "Applied", "configured "+ns+"_settings__ConfigMap")
}

func TestSyncBrokenManifestAppliesNothing(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	s := newSync(t, ns, url, "app")
	first := srv.Log(t, "fleet", "main")[0].SHA
	waitApplied(t, s, first, "local")

	srv.CommitFile(t, "fleet", "main", "app/config.yaml", configMap(ns, "settings", "v2"), "Change settings")
	broken := srv.CommitFile(t, "fleet", "main", "app/broken.yaml", "kind: ConfigMap\nmetadata: [not, a, map\n", "Add a broken file")
	requestReconcile(t, s)
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, s)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.BuildFailedReason))
		g.Expect(c.Message).To(ContainSubstring("broken.yaml"))
		g.Expect(s.Status.LastAttemptedRevision).To(HaveSuffix(broken))
	}).Should(Succeed())
	var cm corev1.ConfigMap
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)).To(Succeed())
	g.Expect(cm.Data["value"]).To(Equal("v1"), "nothing of a revision that does not build is applied")
	getSync(g, s)
	g.Expect(s.Status.Targets[0].LastAppliedRevision).To(HaveSuffix(first))
}

func TestSyncRevertRollsBack(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/web.yaml": deployment(ns, "web", "ghcr.io/acme/web:1.0.0")})
	s := newSync(t, ns, url, "app")
	waitApplied(t, s, srv.Log(t, "fleet", "main")[0].SHA, "local")

	bump := srv.CommitFile(t, "fleet", "main", "app/web.yaml", deployment(ns, "web", "ghcr.io/acme/web:1.1.0"), "Update web to 1.1.0")
	requestReconcile(t, s)
	waitApplied(t, s, bump, "local")
	image := func() string {
		var d appsv1.Deployment
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &d)).To(Succeed())
		return d.Spec.Template.Spec.Containers[0].Image
	}
	g.Expect(image()).To(Equal("ghcr.io/acme/web:1.1.0"))

	revert := srv.Revert(t, "fleet", "main", bump)
	requestReconcile(t, s)
	waitApplied(t, s, revert, "local")
	g.Expect(image()).To(Equal("ghcr.io/acme/web:1.0.0"))
}

func TestSyncWavesWaitForHealthyEarlierWave(t *testing.T) {
	g := NewWithT(t)
	ns, rc := twoRemoteTargets(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/web.yaml": deployment(ns, "web", "ghcr.io/acme/web:1.0.0")})
	s := newSync(t, ns, url, "app", inWaves(10*time.Minute))

	// The first wave's Deployment exists but is not healthy yet; the second
	// wave must not have been touched.
	g.Eventually(func(g Gomega) {
		g.Expect(rc.euC.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})).To(Succeed())
	}).Should(Succeed())
	g.Consistently(func() bool {
		err := rc.usC.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(2*time.Second).Should(BeTrue(), "us-1 waits for eu-1 to be healthy")

	g.Eventually(func() error { return cluster.MarkDeploymentAvailable(context.Background(), rc.euC, ns, "web") }).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(rc.usC.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func() error { return cluster.MarkDeploymentAvailable(context.Background(), rc.usC, ns, "web") }).Should(Succeed())
	first := srv.Log(t, "fleet", "main")[0].SHA
	waitApplied(t, s, first, "eu-1", "us-1")
	g.Eventually(func(g Gomega) { g.Expect(readyCondition(g, s).Status).To(Equal(metav1.ConditionTrue)) }).Should(Succeed())
	for _, ts := range s.Status.Targets {
		g.Expect(ts.HealthySince).NotTo(BeNil(), "target %s is healthy on its revision", ts.Name)
		g.Expect(ts.HealthySince.Time).NotTo(BeTemporally("<", ts.LastAppliedTime.Time))
	}
}

// TestSyncPauseBetweenWavesCountsFromTheFirstApply: a Sync run again
// during its pause (by reconcile requests every half second, as a run for
// a push or a change would) applies the first wave again each time; the
// pause still counts from when that wave got the revision, so the second
// wave starts.
func TestSyncPauseBetweenWavesCountsFromTheFirstApply(t *testing.T) {
	g := NewWithT(t)
	ns, _ := twoRemoteTargets(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	const pause = 3 * time.Second
	s := newSync(t, ns, url, "app", inWaves(time.Minute), func(s *uprevv1.Sync) {
		s.Spec.Wait = false
		s.Spec.Rollout.PauseBetweenWaves = metav1.Duration{Duration: pause}
	})
	first := srv.Log(t, "fleet", "main")[0].SHA
	waitApplied(t, s, first, "eu-1")
	eu := targetAppliedTime(g, s, "eu-1")
	g.Eventually(func(g Gomega) {
		requestReconcile(t, s)
		getSync(g, s)
		g.Expect(s.Status.Targets).To(ContainElement(And(HaveField("Name", "us-1"), HaveField("LastAppliedRevision", "main@sha1:"+first))))
	}).WithTimeout(time.Minute).WithPolling(500*time.Millisecond).Should(Succeed(), "us-1 gets the revision while the Sync runs again")
	waitApplied(t, s, first, "eu-1", "us-1")
	g.Expect(targetAppliedTime(g, s, "eu-1")).To(Equal(eu), "applying the same revision again keeps its time")
	g.Expect(targetAppliedTime(g, s, "us-1").Sub(eu)).To(BeNumerically(">=", pause))
}

// targetAppliedTime returns when the Sync's target applied its last
// revision.
func targetAppliedTime(g Gomega, s *uprevv1.Sync, target string) time.Time {
	for _, ts := range s.Status.Targets {
		if ts.Name == target {
			g.Expect(ts.LastAppliedTime).NotTo(BeNil())
			return ts.LastAppliedTime.Time
		}
	}
	g.Expect(s.Status.Targets).To(ContainElement(HaveField("Name", target)))
	return time.Time{}
}

func TestSyncFailedWaveStopsRollout(t *testing.T) {
	g := NewWithT(t)
	ns, rc := twoRemoteTargets(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	s := newSync(t, ns, url, "app", inWaves(3*time.Second))
	first := srv.Log(t, "fleet", "main")[0].SHA
	waitApplied(t, s, first, "eu-1", "us-1")

	// The new revision adds a Deployment that never becomes healthy in eu-1.
	second := srv.CommitFile(t, "fleet", "main", "app/web.yaml", deployment(ns, "web", "ghcr.io/acme/web:2.0.0"), "Add web")
	requestReconcile(t, s)
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, s)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.HealthCheckFailedReason))
		g.Expect(c.Message).To(ContainSubstring("Deployment/" + ns + "/web"))
		// The targets' records are written apart from the conditions, so
		// they are checked in the same wait.
		getSync(g, s)
		for _, ts := range s.Status.Targets {
			switch ts.Name {
			case "eu-1":
				g.Expect(ts.LastAttemptedRevision).To(HaveSuffix(second))
				g.Expect(ts.Healthy).To(BeFalse())
				g.Expect(ts.HealthySince).To(BeNil(), "a failed health check clears it")
			case "us-1":
				g.Expect(ts.LastAppliedRevision).To(HaveSuffix(first), "the second wave stays on the previous revision")
			}
		}
	}).WithTimeout(time.Minute).Should(Succeed())
	err := rc.usC.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	g.Expect(strings.Contains(s.Status.LastAttemptedRevision, second)).To(BeTrue())
}

func TestSyncFollowsATag(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	v1 := srv.Log(t, "fleet", "main")[0].SHA
	srv.Git(t, "fleet", "tag", "-a", "v1.0.0", "-m", "Release 1.0.0", v1)
	v2 := srv.CommitFile(t, "fleet", "main", "app/config.yaml", configMap(ns, "settings", "v2"), "Change settings")

	s := newSync(t, ns, url, "app", func(s *uprevv1.Sync) { s.Spec.Git.Ref = uprevv1.GitRef{Tag: "v1.0.0"} })
	value := func(g Gomega) string {
		var cm corev1.ConfigMap
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)).To(Succeed())
		return cm.Data["value"]
	}
	g.Eventually(func(g Gomega) {
		getSync(g, s)
		g.Expect(s.Status.Targets).NotTo(BeEmpty())
		g.Expect(s.Status.Targets[0].LastAppliedRevision).To(Equal("v1.0.0@sha1:" + v1))
		g.Expect(value(g)).To(Equal("v1"), "the tag, not the branch tip, is applied")
	}).Should(Succeed())

	srv.Git(t, "fleet", "tag", "-f", "-a", "v1.0.0", "-m", "Release 1.0.0 again", v2)
	requestReconcile(t, s)
	g.Eventually(func(g Gomega) {
		getSync(g, s)
		g.Expect(s.Status.Targets[0].LastAppliedRevision).To(Equal("v1.0.0@sha1:" + v2))
		g.Expect(value(g)).To(Equal("v2"), "a moved tag is followed")
	}).Should(Succeed())
}

func TestSyncUnreachableTargetDoesNotBlockItsWave(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	// A kubeconfig for an API server that is not there: a closed local port.
	dead := []byte(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: admin, user: {token: not-a-real-token}}]
contexts: [{name: gone, context: {cluster: gone, user: admin}}]
current-context: gone
`)
	kubeConfigSecret(t, ns, "gone", dead)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	s := newSync(t, ns, url, "app", func(s *uprevv1.Sync) {
		s.Spec.Targets = []uprevv1.Target{
			{Name: "local"},
			{Name: "gone", KubeConfig: &uprevv1.KubeConfigReference{SecretRef: metaRef("gone")}},
		}
	})
	first := srv.Log(t, "fleet", "main")[0].SHA
	waitApplied(t, s, first, "local")
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, s)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.ApplyFailedReason))
		g.Expect(c.Message).To(ContainSubstring("gone"))
		g.Expect(conditions.IsStalled(s)).To(BeFalse(), "an unreachable cluster is retried")
		getSync(g, s)
		var gone *uprevv1.TargetStatus
		for i := range s.Status.Targets {
			if s.Status.Targets[i].Name == "gone" {
				gone = &s.Status.Targets[i]
			}
		}
		g.Expect(gone).NotTo(BeNil())
		g.Expect(gone.LastAttemptedRevision).To(HaveSuffix(first))
		g.Expect(gone.LastAppliedRevision).To(BeEmpty())
		g.Expect(gone.Message).To(ContainSubstring("unreachable"))
		g.Expect(gone.Message).NotTo(ContainSubstring("not-a-real-token"))
	}).Should(Succeed())
	var cm corev1.ConfigMap
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)).To(Succeed())
}
