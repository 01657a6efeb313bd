package fairness

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// TestRequestedScansAreNeverDropped: twelve ImageRepositories (interval
// 1h) on one registry whose tag lists take 1.5 s, a scan requested on all
// of them at once, as `flux reconcile image repository` and push webhooks
// do, four rounds: the registry's share of the workers is taken, most
// requests wait their turn, and every one is scanned: each policy reaches the new tag within 15 s, and no repository
// says it handled a request before the scan that found the new tag.
func TestRequestedScansAreNeverDropped(t *testing.T) {
	t.Parallel()
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
			requestReconcile(t, repo, token)
		}
		expectTags(tag, round+1, token, 15*time.Second)
		t.Logf("round %d: twelve requested scans selected %s within %s", round, tag, time.Since(start).Round(100*time.Millisecond))
	}
}

// TestRequestedSourceScansAreNeverDropped: twelve ReleaseSources (interval
// 1h) on one feed server that takes 1.5 s to answer, a scan requested on
// all of them at once, three rounds: the server's share of the workers is
// taken, most requests wait their turn, and every one is scanned: each
// source selects the new version within 15 s, and none says it handled a
// request before the scan that found it.
func TestRequestedSourceScansAreNeverDropped(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	ns := newNamespace(t, "requested-sources")
	var version atomic.Value
	version.Store("1.0.0")
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"version":%q}`, version.Load())
	}))
	t.Cleanup(feed.Close)
	const n = 12
	sources := make([]*uprevv1.ReleaseSource, n)
	for i := range n {
		sources[i] = &uprevv1.ReleaseSource{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%d", i)},
			Spec: uprevv1.ReleaseSourceSpec{
				Interval: metav1.Duration{Duration: time.Hour},
				HTTPJSON: &uprevv1.HTTPJSONSource{URL: fmt.Sprintf("%s/app-%d.json", feed.URL, i), Versions: "{.version}"},
				Policy:   imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
			},
		}
		create(t, sources[i])
	}
	expectVersion := func(want, token string, within time.Duration) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			for _, rs := range sources {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(rs), rs)).To(Succeed())
				if token != "" && rs.Status.LastHandledReconcileAt == token {
					// A Gomega failure here would only retry: a request
					// handled without its scan must fail the test at once.
					if rs.Status.Latest == nil || rs.Status.Latest.Version != want {
						t.Fatalf("%s handled the request %s before the scan that finds %s: %+v", rs.Name, token, want, rs.Status.Latest)
					}
				}
				g.Expect(rs.Status.Latest).NotTo(BeNil(), rs.Name)
				g.Expect(rs.Status.Latest.Version).To(Equal(want), rs.Name)
			}
		}, within, 200*time.Millisecond).Should(Succeed())
	}
	// Twelve first scans, two at a time, 1.5 s each.
	expectVersion("1.0.0", "", time.Minute)

	for round := 1; round <= 3; round++ {
		want := fmt.Sprintf("1.%d.0", round)
		version.Store(want)
		start := time.Now()
		token := start.Format(time.RFC3339Nano)
		for _, rs := range sources {
			requestReconcile(t, rs, token)
		}
		expectVersion(want, token, 15*time.Second)
		t.Logf("round %d: twelve requested scans selected %s within %s", round, want, time.Since(start).Round(100*time.Millisecond))
	}
}

// requestReconcile asks for a reconcile of obj now, as `flux reconcile`,
// `uprev reconcile` and push webhooks do, with token as the request.
func requestReconcile(t testing.TB, obj client.Object, token string) {
	t.Helper()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[meta.ReconcileRequestAnnotation] = token
	obj.SetAnnotations(annotations)
	if err := k8s.Patch(context.Background(), obj, patch); err != nil {
		t.Fatalf("requesting a reconcile of %s: %v", obj.GetName(), err)
	}
}
