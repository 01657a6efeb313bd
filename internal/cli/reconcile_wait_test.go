package cli

import (
	"context"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestReconcileSourcesAndGates shows reconcile, suspend and resume on
// ReleaseSources, and reconcile on ReleaseGates, which have nothing to
// suspend.
func TestReconcileSourcesAndGates(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := &uprevv1.ReleaseSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubernetes"},
		Spec: uprevv1.ReleaseSourceSpec{
			Interval:       metav1.Duration{Duration: time.Hour},
			GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "kubernetes/kubernetes"},
			Policy:         imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: "~1.30.0"}},
		},
	}
	createWithStatus(t, src)
	gate := &uprevv1.ReleaseGate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"}, Spec: uprevv1.ReleaseGateSpec{MinReleaseAge: "72h"}}
	createWithStatus(t, gate)

	expectRequested(t, ns, []reconcileCase{
		{[]string{"reconcile", "source", "kubernetes"}, "releasesource.uprev.dev/kubernetes reconcile requested\n", src},
		{[]string{"reconcile", "gates", "prod"}, "releasegate.uprev.dev/prod reconcile requested\n", gate},
	})

	r := uprev(t, "suspend", "releasesources", "kubernetes", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "releasesource.uprev.dev/kubernetes suspended\n"}))
	get(t, src)
	g.Expect(src.Spec.Suspend).To(BeTrue())
	r = uprev(t, "reconcile", "source", "kubernetes", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{code: 1, stderr: "uprev reconcile source: releasesource.uprev.dev/kubernetes is suspended: resume it with 'uprev resume source kubernetes'\n"}))
	r = uprev(t, "resume", "source", "kubernetes", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "releasesource.uprev.dev/kubernetes resumed\n"}))
	get(t, src)
	g.Expect(src.Spec.Suspend).To(BeFalse())

	r = uprev(t, "suspend", "gate", "prod", "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(1))
	g.Expect(r.stderr).To(ContainSubstring(`unknown kind "gate"`))
}

// TestReconcileWaitFollowsARollout plays the Sync controller against
// `uprev reconcile sync --wait`: a rollout in waves keeps it waiting (it
// used to exit 1 at "1 of 2 waves done"), the last wave done ends it with
// success, a failed rollout fails it, and a timeout says where the Sync
// stands.
func TestReconcileWaitFollowsARollout(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	prod := newSync(ns, "prod", "eu-1", "us-1")
	createWithStatus(t, prod)
	token := now.Format(time.RFC3339Nano)

	// setStatus writes what the controller would: the request handled (or
	// not) and the Ready condition.
	setStatus := func(handled string, c metav1.Condition) {
		t.Helper()
		get(t, prod)
		prod.Status.LastHandledReconcileAt = handled
		prod.Status.Conditions = []metav1.Condition{c}
		if err := k8s.Status().Update(context.Background(), prod); err != nil {
			t.Fatal(err)
		}
	}
	// start runs the command and returns its result when it ends.
	start := func(args ...string) <-chan result {
		done := make(chan result, 1)
		go func() { done <- uprev(t, append(args, "-n", ns, kubeconfigFlag)...) }()
		g.Eventually(func() map[string]string { get(t, prod); return prod.Annotations }).
			Should(HaveKeyWithValue(meta.ReconcileRequestAnnotation, token), "the command asks for a reconcile")
		return done
	}

	done := start("reconcile", "sync", "prod", "--wait")
	setStatus(token, ready(metav1.ConditionFalse, uprevv1.RolloutInProgressReason, "rollout of main@sha1:abc: 1 of 2 waves done, next wave in 4s"))
	g.Consistently(done).WithTimeout(2*time.Second).ShouldNot(Receive(), "a rollout under way is waited through")
	setStatus(token, ready(metav1.ConditionTrue, meta.SucceededReason, "applied main@sha1:abc to 2 targets"))
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(Equal(result{
		stdout: "sync.uprev.dev/prod reconcile requested\nsync.uprev.dev/prod reconciled: applied main@sha1:abc to 2 targets\n",
	})))

	setStatus("", ready(metav1.ConditionTrue, meta.SucceededReason, "applied"))
	done = start("reconcile", "sync", "prod", "--wait")
	setStatus(token, ready(metav1.ConditionFalse, uprevv1.RolloutStoppedReason, "us-1: health check failed"))
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(Equal(result{
		code:   1,
		stdout: "sync.uprev.dev/prod reconcile requested\n",
		stderr: "uprev reconcile sync: sync.uprev.dev/prod is not ready: us-1: health check failed\n",
	})))

	setStatus(token, ready(metav1.ConditionFalse, uprevv1.RolloutInProgressReason, "rollout of main@sha1:def: 1 of 2 waves done, next wave in 1h0m0s"))
	g.Expect(uprev(t, "reconcile", "sync", "prod", "--wait", "--timeout", "1s", "-n", ns, kubeconfigFlag)).To(Equal(result{
		code:   1,
		stdout: "sync.uprev.dev/prod reconcile requested\n",
		stderr: "uprev reconcile sync: sync.uprev.dev/prod: still rolling out: rollout of main@sha1:def: 1 of 2 waves done, next wave in 1h0m0s after 1s\n",
	}), "the request of the same time was handled already, so the rollout is what the timeout names")
}

// TestKindHelpSaysPlurals: the help of reconcile, suspend and resume names
// each kind in its plural ("ImagePolicies", not "ImagePolicys").
func TestKindHelpSaysPlurals(t *testing.T) {
	g := NewWithT(t)
	for _, verb := range []string{"reconcile", "suspend", "resume"} {
		r := uprev(t, verb, "-h")
		g.Expect(r.code).To(Equal(0), r.stderr)
		g.Expect(r.stdout).To(ContainSubstring("ImagePolicies"), verb)
		g.Expect(r.stdout).To(ContainSubstring("ImageRepositories"), verb)
		g.Expect(r.stdout).NotTo(MatchRegexp(`Policys|Repositorys`), verb)
	}
}
