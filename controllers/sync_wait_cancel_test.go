package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestSyncHealthWaitIsCancelledByANewRevision: a Sync stuck waiting on a
// revision that never gets healthy takes the fix at once when it arrives,
// instead of waiting out its timeout.
func TestSyncHealthWaitIsCancelledByANewRevision(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/web.yaml": deployment(ns, "web", "ghcr.io/acme/web:1.0.0")})
	s := newSync(t, ns, url, "app", func(s *uprevv1.Sync) {
		s.Spec.Wait = true
		s.Spec.Timeout = &metav1.Duration{Duration: 10 * time.Minute}
	})
	// The Deployment is applied and never becomes healthy: the Sync waits.
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})).To(Succeed())
	}).Should(Succeed())

	fix := srv.CommitFile(t, "fleet", "main", "app/web.yaml", configMap(ns, "web", "v1"), "Replace the broken Deployment")
	requestReconcile(t, s)
	g.Eventually(func(g Gomega) {
		getWithTargets(g, s)
		g.Expect(s.Status.Targets).To(HaveLen(1))
		g.Expect(s.Status.Targets[0].LastAppliedRevision).To(Equal("main@sha1:"+fix), s.Status.Targets[0].Message)
	}).WithTimeout(30*time.Second).Should(Succeed(), "the fix is applied within seconds, not after the 10m health wait")
}

// TestSyncCancelledHealthWaitIsNoFailure: a health wait cut short by a
// request to reconcile is not an outcome. The target's record says so and
// does not report the revision as attempted and failed (which the fleet
// page shows as a failed target, and which counts against maxFailures),
// while the next run applies it and waits again.
func TestSyncCancelledHealthWaitIsNoFailure(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/web.yaml": deployment(ns, "web", "ghcr.io/acme/web:1.0.0")})
	revision := "main@sha1:" + srv.Log(t, "fleet", "main")[0].SHA
	s := newSync(t, ns, url, "app", func(s *uprevv1.Sync) {
		s.Spec.Wait = true
		s.Spec.Timeout = &metav1.Duration{Duration: 10 * time.Minute}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})).To(Succeed())
	}).Should(Succeed())

	requestReconcile(t, s)
	g.Eventually(func(g Gomega) {
		getWithTargets(g, s)
		g.Expect(s.Status.Targets).To(HaveLen(1))
		g.Expect(s.Status.Targets[0].Message).To(ContainSubstring("cancelled"))
	}).Should(Succeed(), "the request cancels the wait")
	ts := s.Status.Targets[0]
	g.Expect(ts.LastAttemptedRevision).NotTo(Equal(revision), "a cancelled wait is no attempt that failed: %+v", ts)
	g.Expect(ts.Healthy).To(BeFalse())
}
