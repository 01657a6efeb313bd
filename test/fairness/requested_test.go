package fairness

import (
	"context"
	"fmt"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// TestRequestedScansAreNeverDropped: twelve ImageRepositories (interval
// 1h) on one registry whose tag lists take 1.5 s, a scan requested on all
// of them at once, as `flux reconcile image repository` and push webhooks
// do, four rounds: the registry's share of the workers is taken, most
// requests wait their turn, and every one is scanned: each policy reaches the new tag within 15 s, and no repository
// says it handled a request before the scan that found the new tag.
func TestRequestedScansAreNeverDropped(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	ns := newNamespace(t, "requested")
	reg := registry.Start(t, registry.WithTagListDelay(1500*time.Millisecond))
	const n = 12
	repos := make([]*imagev1.ImageRepository, n)
	policies := make([]*imagev1.ImagePolicy, n)
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		reg.PushTags(t, "acme/"+name, "1.0.0")
		repos[i] = &imagev1.ImageRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       imagev1.ImageRepositorySpec{Image: reg.Image("acme/" + name), Insecure: true, Interval: metav1.Duration{Duration: time.Hour}},
		}
		create(t, repos[i])
		policies[i] = &imagev1.ImagePolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: imagev1.ImagePolicySpec{
				ImageRepositoryRef: meta.NamespacedObjectReference{Name: name},
				Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
			},
		}
		create(t, policies[i])
	}
	expectTags := func(tag string, tags int, token string, within time.Duration) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			for i := range n {
				repo, pol := repos[i], policies[i]
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(repo), repo)).To(Succeed())
				if token != "" && repo.Status.LastHandledReconcileAt == token {
					g.Expect(repo.Status.LastScanResult).NotTo(BeNil())
					// A Gomega failure here would only retry: a request
					// handled without its scan must fail the test at once.
					if got := repo.Status.LastScanResult.TagCount; got != tags {
						t.Fatalf("%s handled the request %s with %d tags, before the scan that finds %d", repo.Name, token, got, tags)
					}
				}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pol), pol)).To(Succeed())
				g.Expect(pol.Status.LatestRef).NotTo(BeNil(), pol.Name)
				g.Expect(pol.Status.LatestRef.Tag).To(Equal(tag), pol.Name)
			}
		}, within, 200*time.Millisecond).Should(Succeed())
	}
	// Twelve first scans, two at a time, 1.5 s each.
	expectTags("1.0.0", 1, "", time.Minute)

	for round := 1; round <= 4; round++ {
		tag := fmt.Sprintf("1.%d.0", round)
		for i := range n {
			reg.PushTags(t, fmt.Sprintf("acme/app-%d", i), tag)
		}
		start := time.Now()
		token := start.Format(time.RFC3339Nano)
		for _, repo := range repos {
			patch := client.MergeFrom(repo.DeepCopy())
			if repo.Annotations == nil {
				repo.Annotations = map[string]string{}
			}
			repo.Annotations[meta.ReconcileRequestAnnotation] = token
			g.Expect(k8s.Patch(ctx, repo, patch)).To(Succeed())
		}
		expectTags(tag, round+1, token, 15*time.Second)
		t.Logf("round %d: twelve requested scans selected %s within %s", round, tag, time.Since(start).Round(100*time.Millisecond))
	}
}
