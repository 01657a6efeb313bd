package apply

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

// requestCounts are the requests an Applier sent, by what they do;
// discovery is not counted.
type requestCounts struct {
	// lists are metadata-only LISTs.
	lists int
	// gets are reads of single objects (and full lists).
	gets int
	// dryRuns are server-side dry-run applies.
	dryRuns int
	// applies are server-side applies and other writes.
	applies int
}

// requestCounter counts the requests an Applier sends.
type requestCounter struct {
	mu     sync.Mutex
	counts requestCounts
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip implements http.RoundTripper.
func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// isDiscovery tells whether r asks for discovery: /api, /api/v1, /apis,
// /apis/<group>, /apis/<group>/<version>.
func isDiscovery(r *http.Request) bool {
	segments := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	return segments[0] == "api" && len(segments) <= 2 || segments[0] == "apis" && len(segments) <= 3
}

// count classifies one request.
func (c *requestCounter) count(r *http.Request) {
	discovery := isDiscovery(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadataList"):
		c.counts.lists++
	case r.Method == http.MethodGet && !discovery:
		c.counts.gets++
	case r.Method == http.MethodPatch && r.URL.Query().Has("dryRun"):
		c.counts.dryRuns++
	case r.Method != http.MethodGet:
		c.counts.applies++
	}
}

// take returns the counts so far and starts again from zero.
func (c *requestCounter) take() requestCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	taken := c.counts
	c.counts = requestCounts{}
	return taken
}

// countingApplier returns a new Applier to testCluster whose requests are
// counted.
func countingApplier(t *testing.T) (*Applier, *requestCounter) {
	t.Helper()
	counts := &requestCounter{}
	cfg := rest.CopyConfig(testCluster.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			counts.count(r)
			return rt.RoundTrip(r)
		})
	}
	a, err := NewApplier(cfg, nil)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return a, counts
}

// tenObjects returns eight ConfigMaps named cm-0 to cm-7 and two
// Deployments in ns.
func tenObjects(t *testing.T, ns string) []*unstructured.Unstructured {
	t.Helper()
	files := map[string]string{
		"deploy.yaml": fmt.Sprintf(deploymentYAML, "app", ns) + "---\n" + fmt.Sprintf(deploymentYAML, "worker", ns),
	}
	for i := range 8 {
		files[fmt.Sprintf("cm-%d.yaml", i)] = fmt.Sprintf(configMapYAML, fmt.Sprintf("cm-%d", i), ns, "wanted")
	}
	return manifests(t, files)
}

func TestUnchangedSetIsOnlyListed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objects := tenObjects(t, ns)
	applier, counts := countingApplier(t)

	first, err := applier.Apply(ctx, objects, nil, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Created()).To(HaveLen(10))
	counts.take()

	// The versions returned by the first apply are enough: one LIST per
	// kind and namespace, no read of an object, no dry-run, no write.
	for range 2 {
		result, err := applier.Apply(ctx, objects, first.Inventory, Options{Owner: testOwner, Prune: true})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(result.Unchanged()).To(HaveLen(10))
		g.Expect(result.Changed()).To(BeFalse())
		g.Expect(result.Inventory).To(Equal(first.Inventory))
		g.Expect(counts.take()).To(Equal(requestCounts{lists: 2}))
	}

	// A new Applier, as after a restart, remembers nothing: it diffs every
	// object once, and learns their versions from that.
	fresh, freshCounts := countingApplier(t)
	result, err := fresh.Apply(ctx, objects, first.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Unchanged()).To(HaveLen(10))
	g.Expect(freshCounts.take()).To(Equal(requestCounts{lists: 2, gets: 10, dryRuns: 10}))
	result, err = fresh.Apply(ctx, objects, first.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Unchanged()).To(HaveLen(10))
	g.Expect(freshCounts.take()).To(Equal(requestCounts{lists: 2}))
}

func TestDriftIsCorrectedAfterUnchangedReconcile(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objects := tenObjects(t, ns)
	applier, counts := countingApplier(t)
	result, err := applier.Apply(ctx, objects, nil, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	result, err = applier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Changed()).To(BeFalse())
	counts.take()

	// One object is edited and one deleted directly in the cluster.
	cm, err := get("v1", "ConfigMap", ns, "cm-1")
	g.Expect(err).NotTo(HaveOccurred())
	cm.Object["data"] = map[string]any{"key": "edited"}
	g.Expect(k8sClient.Update(ctx, cm)).To(Succeed())
	deleted, err := get("v1", "ConfigMap", ns, "cm-2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8sClient.Delete(ctx, deleted)).To(Succeed())

	// Only those two are diffed, and both are put back.
	result, err = applier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Configured()).To(ConsistOf(id(ns, "cm-1", "", "ConfigMap")))
	g.Expect(result.Created()).To(ConsistOf(id(ns, "cm-2", "", "ConfigMap")))
	g.Expect(result.Unchanged()).To(HaveLen(8))
	// Each is diffed by validation and again by ssa before its apply.
	g.Expect(counts.take()).To(Equal(requestCounts{lists: 2, gets: 4, dryRuns: 4, applies: 2}))
	cm, err = get("v1", "ConfigMap", ns, "cm-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Object["data"]).To(HaveKeyWithValue("key", "wanted"))
	_, err = get("v1", "ConfigMap", ns, "cm-2")
	g.Expect(err).NotTo(HaveOccurred())

	// What uprev wrote is not taken for drift.
	result, err = applier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Changed()).To(BeFalse())
	g.Expect(counts.take()).To(Equal(requestCounts{lists: 2}))
}

func TestChangedManifestIsDiffedAndApplied(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objects := tenObjects(t, ns)
	applier, counts := countingApplier(t)
	result, err := applier.Apply(ctx, objects, nil, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	counts.take()

	// A new revision changes one ConfigMap and drops another.
	var changed []*unstructured.Unstructured
	for _, o := range objects {
		o = o.DeepCopy()
		switch o.GetName() {
		case "cm-3":
			o.Object["data"] = map[string]any{"key": "new"}
		case "cm-4":
			continue
		}
		changed = append(changed, o)
	}
	result, err = applier.Apply(ctx, changed, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Configured()).To(ConsistOf(id(ns, "cm-3", "", "ConfigMap")))
	g.Expect(result.Deleted()).To(ConsistOf(id(ns, "cm-4", "", "ConfigMap")))
	g.Expect(result.Unchanged()).To(HaveLen(8))
	// cm-3 is diffed twice and applied; ssa reads cm-4 before deleting it.
	g.Expect(counts.take()).To(Equal(requestCounts{lists: 2, gets: 3, dryRuns: 2, applies: 2}))
	cm, err := get("v1", "ConfigMap", ns, "cm-3")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Object["data"]).To(HaveKeyWithValue("key", "new"))

	result, err = applier.Apply(ctx, changed, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Changed()).To(BeFalse())
	g.Expect(counts.take()).To(Equal(requestCounts{lists: 2}))

	// The old manifest is diffed again, not taken from memory.
	result, err = applier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Configured()).To(ConsistOf(id(ns, "cm-3", "", "ConfigMap")))
	g.Expect(result.Created()).To(ConsistOf(id(ns, "cm-4", "", "ConfigMap")))
}

func TestReconcileDisabledObjectStaysSkipped(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objects := tenObjects(t, ns)
	applier, counts := countingApplier(t)
	result, err := applier.Apply(ctx, objects, nil, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())

	held, err := get("v1", "ConfigMap", ns, "cm-5")
	g.Expect(err).NotTo(HaveOccurred())
	held.SetAnnotations(map[string]string{ReconcileAnnotation: DisabledValue})
	held.Object["data"] = map[string]any{"key": "edited"}
	g.Expect(k8sClient.Update(ctx, held)).To(Succeed())

	for range 2 {
		counts.take()
		result, err = applier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Prune: true})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(result.Skipped()).To(ConsistOf(id(ns, "cm-5", "", "ConfigMap")))
		g.Expect(result.Changed()).To(BeFalse())
	}
	g.Expect(counts.take()).To(Equal(requestCounts{lists: 2}), "a skipped object is remembered as skipped")
	held, err = get("v1", "ConfigMap", ns, "cm-5")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(held.Object["data"]).To(HaveKeyWithValue("key", "edited"))
}

func TestRememberedVersionsAreVerifiedAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objects := tenObjects(t, ns)
	applier, counts := countingApplier(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	applier.clock = clk
	result, err := applier.Apply(ctx, objects, nil, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	counts.take()

	clk.SetTime(clk.Now().Add(reverifyAfter - time.Second))
	_, err = applier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(counts.take()).To(Equal(requestCounts{lists: 2}))

	clk.SetTime(clk.Now().Add(time.Second))
	result, err = applier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Unchanged()).To(HaveLen(10))
	g.Expect(counts.take()).To(Equal(requestCounts{lists: 2, gets: 10, dryRuns: 10}))

	_, err = applier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(counts.take()).To(Equal(requestCounts{lists: 2}))
}

func TestVersionsAreRememberedPerIdentity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objects := manifests(t, map[string]string{
		"a.yaml": fmt.Sprintf(configMapYAML, "a", ns, "1"),
		"b.yaml": fmt.Sprintf(configMapYAML, "b", ns, "1"),
	})
	applier, counts := countingApplier(t)
	_, err := applier.Apply(ctx, objects, nil, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(k8sClient.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}},
	})).To(Succeed())
	g.Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: ns}},
	})).To(Succeed())

	// Wait, with another Applier, until the service account may do what
	// it needs.
	opts := Options{Owner: testOwner, ServiceAccount: "deployer", ServiceAccountNamespace: ns}
	other, err := NewApplier(testCluster.Config, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		_, err := other.Apply(ctx, objects, nil, opts)
		g.Expect(err).NotTo(HaveOccurred())
	}).Should(Succeed())

	// What the Applier's own user verified does not spare the service
	// account its own dry-runs.
	counts.take()
	result, err := applier.Apply(ctx, objects, nil, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Unchanged()).To(HaveLen(2))
	g.Expect(counts.take()).To(Equal(requestCounts{lists: 1, gets: 2, dryRuns: 2}))
	_, err = applier.Apply(ctx, objects, nil, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(counts.take()).To(Equal(requestCounts{lists: 1}))
}

func TestConcurrentAppliesOfOneSet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objects := tenObjects(t, ns)
	applier, _ := countingApplier(t)
	first, err := applier.Apply(ctx, objects, nil, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())

	var wg sync.WaitGroup
	results := make([]Result, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = applier.Apply(ctx, objects, first.Inventory, Options{Owner: testOwner, Prune: true})
		})
	}
	wg.Wait()
	for i := range results {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		g.Expect(results[i].Unchanged()).To(HaveLen(10))
	}
}
