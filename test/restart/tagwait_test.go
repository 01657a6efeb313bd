package restart

import (
	"context"
	"sync"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// TestReadyPolicyKeepsItsStatusUntilARestartedManagerStoresTags: a manager
// restarted with empty storage has no tags stored until its first scan of
// each repository, and may run a policy before that scan. A policy that
// was Ready stays Ready meanwhile, in every status the API server holds
// (watched, not polled); the scan runs it again; and a scan that does not
// come (a registry that does not answer) is shown within a bounded time,
// with the last selection kept.
func TestReadyPolicyKeepsItsStatusUntilARestartedManagerStoresTags(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := manager.StartCluster(t)
	k8s := c.Client
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	bin := manager.Build(t)
	_, pol := createAgent(t, k8s, reg.Image("acme/agent"))
	ready := func(g Gomega) *metav1.Condition {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pol), pol)).To(Succeed())
		return conditions.Get(pol, meta.ReadyCondition)
	}

	first := manager.Start(t, bin, c.KubeConfigPath, t.TempDir(), "--controllers=image")
	g.Eventually(ready).WithTimeout(time.Minute).Should(HaveField("Status", metav1.ConditionTrue))
	g.Expect(pol.Status.LatestRef).To(HaveField("Tag", "1.1.0"))
	first.Stop()

	// Every Ready condition the policy is given from now on.
	seen := watchReady(t, c, pol)

	// Restarted with empty storage, its scan held at the registry: the
	// policy runs, finds no tags stored, and waits without a word.
	release := reg.Hold()
	second := manager.Start(t, bin, c.KubeConfigPath, t.TempDir(), "--controllers=image")
	g.Eventually(func() string { return second.Logs(t) }).WithTimeout(time.Minute).Should(
		ContainSubstring(`tags of ImageRepository fleet/agent are not stored yet`), "the policy ran before the scan")
	release()
	g.Eventually(func() string { return second.Logs(t) }).WithTimeout(time.Minute).Should(
		ContainSubstring(`"msg":"Scanned repository"`), "the restarted manager scanned")
	g.Eventually(func() string { return second.Logs(t) }).WithTimeout(time.Minute).Should(
		MatchRegexp(`are not stored yet(?s:.*)"msg":"Reconcile finished","controller":"imagepolicy".*"error":null`), "the policy ran again on the stored tags")
	second.Stop()
	for _, cond := range seen() {
		g.Expect(cond).To(HaveField("Status", metav1.ConditionTrue), "the policy's Ready condition flapped during the restart")
	}

	// Restarted with empty storage again, and the registry does not
	// answer: the wait is shown, and the selection stays.
	release = reg.Hold()
	defer release()
	manager.Start(t, bin, c.KubeConfigPath, t.TempDir(), "--controllers=image")
	g.Eventually(ready).WithTimeout(time.Minute).Should(And(
		HaveField("Status", metav1.ConditionFalse),
		HaveField("Reason", meta.DependencyNotReadyReason),
		HaveField("Message", ContainSubstring("tags of ImageRepository fleet/agent are not stored yet"))))
	g.Expect(pol.Status.LatestRef).To(HaveField("Tag", "1.1.0"), "the last selection is kept")
	release()
	g.Eventually(ready).WithTimeout(time.Minute).Should(HaveField("Status", metav1.ConditionTrue))
}

// watchReady records the Ready condition of every version of pol that the
// API server stores from now on, until the test ends; the returned
// function gives those seen so far.
func watchReady(t *testing.T, c *manager.Cluster, pol *imagev1.ImagePolicy) func() []*metav1.Condition {
	t.Helper()
	w, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	watch, err := w.Watch(ctx, &imagev1.ImagePolicyList{}, client.InNamespace(pol.Namespace),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: pol.ResourceVersion, FieldSelector: "metadata.name=" + pol.Name}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []*metav1.Condition
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range watch.ResultChan() {
			if p, ok := e.Object.(*imagev1.ImagePolicy); ok {
				mu.Lock()
				seen = append(seen, conditions.Get(p, meta.ReadyCondition))
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		watch.Stop()
		<-done
	})
	return func() []*metav1.Condition {
		mu.Lock()
		defer mu.Unlock()
		return append([]*metav1.Condition(nil), seen...)
	}
}
