package fairness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// slowGit is how late the slow Git server of the requested-run tests
// answers each Git session (every clone, fetch and push starts with one):
// an automation's run, a fetch and a push, takes twice that.
const slowGit = 600 * time.Millisecond

// requestedObjects is how many Syncs, or automations, the requested-run
// tests point at one slow Git server: three times the manager's workers
// per kind, so that most requests wait for a share.
const requestedObjects = 12

// TestRequestedSyncsAreNeverDropped: twelve Syncs (interval 1h), each of
// its own repository on one Git server that answers every session a
// second late, a reconcile requested on all of them at once, three
// rounds, each after a new commit in every repository: the server's
// share of the workers is taken, most requests wait their turn, and every
// one is run: each Sync fetches and applies the new commit within 15 s,
// and none says it handled a request before fetching that commit.
func TestRequestedSyncsAreNeverDropped(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	ns := newNamespace(t, "requested-syncs")
	git := gitserver.Start(t, gitserver.WithAdvertiseDelay(slowGit))
	syncs := make([]*uprevv1.Sync, requestedObjects)
	heads := make([]string, requestedObjects)
	for i := range syncs {
		repo := fmt.Sprintf("apps-%d", i)
		url := git.InitRepo(t, repo, "main", map[string]string{"apps/cm.yaml": configMap(ns, i, 0)})
		heads[i] = git.Log(t, repo, "main")[0].SHA
		syncs[i] = newSync(ns, repo, url)
		create(t, syncs[i])
	}
	expectApplied := func(round int, token string, within time.Duration) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			for i, s := range syncs {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
				fetched := strings.HasSuffix(s.Status.LastAttemptedRevision, heads[i])
				if token != "" && s.Status.LastHandledReconcileAt == token && !fetched {
					// A Gomega failure here would only retry: a request
					// handled without its run must fail the test at once.
					t.Fatalf("%s handled the request %s at %s, before fetching %s", s.Name, token, s.Status.LastAttemptedRevision, heads[i])
				}
				g.Expect(fetched).To(BeTrue(), "%s fetched %s, not %s", s.Name, s.Status.LastAttemptedRevision, heads[i])
				var cm corev1.ConfigMap
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name}, &cm)).To(Succeed())
				g.Expect(cm.Data).To(HaveKeyWithValue("round", fmt.Sprint(round)), s.Name)
			}
		}, within, 200*time.Millisecond).Should(Succeed())
	}
	// Twelve first runs, a few at a time, 0.6 s or more each.
	expectApplied(0, "", time.Minute)

	for round := 1; round <= 3; round++ {
		for i := range syncs {
			heads[i] = git.CommitFile(t, fmt.Sprintf("apps-%d", i), "main", "apps/cm.yaml", configMap(ns, i, round), fmt.Sprintf("round %d", round))
		}
		start := time.Now()
		token := start.Format(time.RFC3339Nano)
		for _, s := range syncs {
			requestReconcile(t, s, token)
		}
		expectApplied(round, token, 15*time.Second)
		t.Logf("round %d: twelve requested Syncs applied their new commit within %s", round, time.Since(start).Round(100*time.Millisecond))
	}
}

// configMap is the manifest of the i-th repository's ConfigMap in round.
func configMap(ns string, i, round int) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: apps-%d\n  namespace: %s\ndata:\n  round: %q\n", i, ns, fmt.Sprint(round))
}

// TestRequestedAutomationsAreNeverDropped: twelve UpdateAutomations
// (interval 1h), each of its own repository on one Git server that
// answers every session 0.6 s late, following one policy; three
// rounds, each with a new version of the policy and a run requested on
// all twelve at once: the server's share of the workers is taken, most
// requests wait their turn, and every one is run: each repository has the
// new version within 15 s, and no automation says it handled a request
// before the run that wrote it.
func TestRequestedAutomationsAreNeverDropped(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	ns := newNamespace(t, "requested-automations")
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0")
	repo, pol := makePolicy(t, g, ns, reg)
	expectPolicy := func(tag string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pol), pol)).To(Succeed())
			g.Expect(pol.Status.LatestRef).NotTo(BeNil())
			g.Expect(pol.Status.LatestRef.Tag).To(Equal(tag))
		}, 15*time.Second).Should(Succeed())
	}
	expectPolicy("1.0.0")

	git := gitserver.Start(t, gitserver.WithAdvertiseDelay(slowGit))
	line := func(tag string) string {
		return fmt.Sprintf("image: %s:%s # {\"$imagepolicy\": \"%s:agent\"}\n", reg.Image("acme/agent"), tag, ns)
	}
	autos := make([]*uprevv1.UpdateAutomation, requestedObjects)
	for i := range autos {
		name := fmt.Sprintf("apps-%d", i)
		url := git.InitRepo(t, name, "main", map[string]string{"deploy/agent.yaml": line("0.9.0")})
		autos[i] = newAutomation(ns, name, url)
		create(t, autos[i])
	}
	expectWritten := func(tag, token string, within time.Duration) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			for _, a := range autos {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
				written := a.Status.ObservedPolicies["agent"].Tag == tag
				if token != "" && a.Status.LastHandledReconcileAt == token && !written {
					// A Gomega failure here would only retry: a request
					// handled without its run must fail the test at once.
					t.Fatalf("%s handled the request %s with the policy at %+v, before the run that writes %s", a.Name, token, a.Status.ObservedPolicies["agent"], tag)
				}
				g.Expect(written).To(BeTrue(), "%s observed %+v, not %s", a.Name, a.Status.ObservedPolicies, tag)
				g.Expect(git.ReadFile(t, a.Name, "main", "deploy/agent.yaml")).To(ContainSubstring(":"+tag), a.Name)
			}
		}, within, 200*time.Millisecond).Should(Succeed())
	}
	// Twelve first runs, a few at a time, two Git sessions or more each.
	expectWritten("1.0.0", "", time.Minute)

	for round := 1; round <= 3; round++ {
		tag := fmt.Sprintf("1.%d.0", round)
		reg.PushTags(t, "acme/agent", tag)
		requestReconcile(t, repo, time.Now().Format(time.RFC3339Nano))
		expectPolicy(tag)
		start := time.Now()
		token := start.Format(time.RFC3339Nano)
		for _, a := range autos {
			requestReconcile(t, a, token)
		}
		expectWritten(tag, token, 15*time.Second)
		t.Logf("round %d: twelve requested automations wrote %s within %s", round, tag, time.Since(start).Round(100*time.Millisecond))
	}
}
