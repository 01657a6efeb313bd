package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/fleet"
)

// configMap returns the YAML of a ConfigMap in namespace ns.
func configMap(ns, name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  value: %q\n", name, ns, value)
}

// deployment returns the YAML of a Deployment running image.
func deployment(ns, name, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
      containers:
      - name: app
        image: %[3]s
`, ns, name, image)
}

// newSync creates a Sync of path in the repository at url.
func newSync(t testing.TB, ns, url, path string, mutate ...func(*uprevv1.Sync)) *uprevv1.Sync {
	t.Helper()
	s := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
			Path:     path,
			Targets:  []uprevv1.Target{{Name: "local"}},
			Prune:    true,
		},
	}
	for _, m := range mutate {
		m(s)
	}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatalf("creating Sync: %v", err)
	}
	return s
}

// getSync reads a Sync, with its targets' records attached to its status
// (fleet.AttachTargets) as readers see them.
func getSync(g Gomega, s *uprevv1.Sync) {
	ctx := context.Background()
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	syncs := []uprevv1.Sync{*s}
	g.Expect(fleet.AttachTargets(ctx, k8s, syncs)).To(Succeed())
	*s = syncs[0]
}

// appliedRevision waits until every target of the Sync applied a revision
// ending in commit, and returns the Sync.
func waitApplied(t *testing.T, s *uprevv1.Sync, commit string, targets ...string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		getSync(g, s)
		for _, name := range targets {
			var found bool
			for _, ts := range s.Status.Targets {
				if ts.Name == name {
					found = true
					g.Expect(ts.LastAppliedRevision).To(Equal("main@sha1:"+commit), "target %s: %s", name, ts.Message)
				}
			}
			g.Expect(found).To(BeTrue(), "target %s has no status", name)
		}
	}).WithTimeout(time.Minute).Should(Succeed())
}

// expectEvent waits for an event on the named object with the reason and a
// note containing text.
func expectEvent(t *testing.T, ns, name, reason, text string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var events eventsList
		g.Expect(k8s.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range events.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(text)))
	}).Should(Succeed())
}
