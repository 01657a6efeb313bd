package cli

import (
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestGetFleet shows the fleet view for a Sync whose first wave runs the
// latest agent and whose second waits for it: read from the apiserver,
// built and printed by internal/fleet (whose golden tests cover each cell).
func TestGetFleet(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	createWithStatus(t, &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: "ghcr.io/acme/agent"},
	})
	agent := newPolicy(ns, "agent", meta.NamespacedObjectReference{Name: "agent"})
	agent.Status.LatestRef = &imagev1.ImageRef{Name: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: agentDigest}
	agent.Status.Conditions = []metav1.Condition{ready(metav1.ConditionTrue, meta.SucceededReason, "resolved to 1.4.2")}
	createWithStatus(t, agent)

	prod := newSync(ns, "prod", "eu-1", "us-1")
	prod.Spec.Rollout = &uprevv1.Rollout{Waves: [][]string{{"eu-1"}, {"us-1"}}}
	prod.Status = uprevv1.SyncStatus{
		LastAttemptedRevision: syncRevision,
		Targets: []uprevv1.TargetStatus{
			{Name: "eu-1", LastAppliedRevision: syncRevision, LastAttemptedRevision: syncRevision, Healthy: true,
				Components: []uprevv1.AppliedComponent{{Image: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: agentDigest}}},
			{Name: "us-1", LastAppliedRevision: "main@sha1:" + oldCommit, LastAttemptedRevision: "main@sha1:" + oldCommit, Healthy: true,
				Components: []uprevv1.AppliedComponent{{Image: "ghcr.io/acme/agent", Tag: "1.4.1"}}},
		},
	}
	createWithStatus(t, prod)
	eligible := metav1.NewTime(now.Add(52*time.Hour + 20*time.Second))
	createWithStatus(t, &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec:       uprevv1.ReleaseGateSpec{MinReleaseAge: "72h"},
		Status: uprevv1.ReleaseGateStatus{Policies: []uprevv1.GatedPolicy{{Name: "agent", Waiting: []uprevv1.WaitingVersion{
			{Tag: "1.5.1", Gate: "minReleaseAge", EligibleAt: &eligible},
		}}}},
	})

	r := uprev(t, "get", "fleet", "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(r.stdout).To(Equal(table(
		"COMPONENT   LATEST                              eu-1    us-1",
		"agent       1.4.2 (1.5.1 waiting: age, 2d 4h)   1.4.2   1.4.1 (waiting)",
	)))

	r = uprev(t, "get", "fleet", "-n", ns, "-o", "json", kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(r.stdout).To(ContainSubstring(`"state": "waiting"`))

	r = uprev(t, "get", "fleet", "-n", "kube-public", kubeconfigFlag)
	g.Expect(r).To(Equal(result{stderr: "No components deployed by a Sync found in namespace kube-public.\n"}))
}

// TestGetFleetShowsARejection: a version held by a rejection shows, in
// the fleet view, with the reason its commit gives, on one line and with
// its control characters escaped: the reason is a tenant's text.
func TestGetFleetShowsARejection(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	createWithStatus(t, &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: "ghcr.io/acme/agent"},
	})
	agent := newPolicy(ns, "agent", meta.NamespacedObjectReference{Name: "agent"})
	agent.Status.LatestRef = &imagev1.ImageRef{Name: "ghcr.io/acme/agent", Tag: "1.4.2"}
	agent.Status.Conditions = []metav1.Condition{ready(metav1.ConditionTrue, meta.SucceededReason, "resolved to 1.4.2")}
	createWithStatus(t, agent)
	prod := newSync(ns, "prod", "eu-1")
	prod.Status = uprevv1.SyncStatus{
		LastAttemptedRevision: syncRevision,
		Targets: []uprevv1.TargetStatus{{Name: "eu-1", LastAppliedRevision: syncRevision, LastAttemptedRevision: syncRevision, Healthy: true,
			Components: []uprevv1.AppliedComponent{{Image: "ghcr.io/acme/agent", Tag: "1.4.1"}}}},
	}
	createWithStatus(t, prod)
	fleet := newAutomation(ns, "fleet")
	fleet.Status.Holds = []uprevv1.Hold{{Policy: ns + "/agent", Version: "1.4.2", RevertedIn: agentRevert, Reason: hostileReason}}
	createWithStatus(t, fleet)

	r := uprev(t, "get", "fleet", "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(unprintable(r.stdout)).To(BeEmpty(), "%q", r.stdout)
	g.Expect(r.stdout).To(Equal(table(
		`COMPONENT   LATEST                                                 eu-1`,
		`agent       1.4.2 (rejected: crashes\x1b[2J on arm64\x07 see #1)   1.4.1 (held)`,
	)))
	r = uprev(t, "get", "fleet", "-n", ns, "-o", "json", kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(unprintable(r.stdout)).To(BeEmpty(), "%q", r.stdout)
	g.Expect(r.stdout).To(ContainSubstring(`"reason": "crashes\u001b[2J\non\tarm64\u0007 see #1"`))
}
