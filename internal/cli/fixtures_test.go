package cli

import (
	"context"
	"testing"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// Commits and digests the fixtures' status names.
const (
	pushCommit   = "3f1c0d9a2b4e6f8091a2b3c4d5e6f708192a3b4c"
	agentRevert  = "9ab2c3d4e5f60718293a4b5c6d7e8f9012345678"
	appRevert    = "1234567890abcdef1234567890abcdef12345678"
	webRevert    = "fedcba9876543210fedcba9876543210fedcba98"
	syncCommit   = "c0ffee0000111122223333444455556666777788"
	oldCommit    = "0dd0000000111122223333444455556666777788"
	agentDigest  = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	syncRevision = "main@sha1:" + syncCommit
)

// ready returns a Ready condition.
func ready(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: meta.ReadyCondition, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
}

// createWithStatus creates obj, then writes the status it was given
// through the status subresource, as a controller would.
func createWithStatus(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	withStatus := obj.DeepCopyObject().(client.Object)
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
	withStatus.SetResourceVersion(obj.GetResourceVersion())
	if err := k8s.Status().Update(ctx, withStatus); err != nil {
		t.Fatalf("writing the status of %s: %v", obj.GetName(), err)
	}
}

// newFluxAutomation returns a Flux ImageUpdateAutomation reading the
// GitRepository flux-system, pushing to flux/updates, whose annotation
// publishes holds as the manager does.
func newFluxAutomation(ns, name string, holds ...uprevv1.Hold) *iacv1.ImageUpdateAutomation {
	flux := &iacv1.ImageUpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: iacv1.ImageUpdateAutomationSpec{
			SourceRef: iacv1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "flux-system"},
			Interval:  metav1.Duration{Duration: time.Hour},
			GitSpec: &iacv1.GitSpec{
				Commit: iacv1.CommitSpec{Author: iacv1.CommitUser{Name: "flux", Email: "flux@example.com"}},
				Push:   &iacv1.PushSpec{Branch: "flux/updates"},
			},
		},
	}
	if len(holds) > 0 {
		flux.Annotations = map[string]string{uprevv1.HoldsAnnotation: uprevv1.EncodeHolds(holds)}
	}
	return flux
}

// newPolicy returns a semver ImagePolicy of the repository repo.
func newPolicy(ns, name string, repo meta.NamespacedObjectReference) *imagev1.ImagePolicy {
	return &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: repo,
			Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
		},
	}
}

// newAutomation returns an UpdateAutomation of fleet.git.
func newAutomation(ns, name string) *uprevv1.UpdateAutomation {
	return &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: "https://git.example.com/fleet.git", Ref: uprevv1.GitRef{Branch: "main"}},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
			},
		},
	}
}

// newSync returns a Sync of fleet.git's path clusters/<name> to targets.
func newSync(ns, name string, targets ...string) *uprevv1.Sync {
	s := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: "https://git.example.com/fleet.git", Ref: uprevv1.GitRef{Branch: "main"}},
			Path:     "./clusters/" + name,
		},
	}
	for _, target := range targets {
		s.Spec.Targets = append(s.Spec.Targets, uprevv1.Target{Name: target})
	}
	return s
}

// createFleet creates in ns what the get tests list: two policies (one
// with a latest version, one not ready), two automations (one with a push
// and two holds, one of them released; one suspended and never run), a
// Flux ImageUpdateAutomation with one hold, and two Syncs (one applied to two of its three targets; one suspended).
func createFleet(t *testing.T, ns string) {
	t.Helper()
	agent := newPolicy(ns, "agent", meta.NamespacedObjectReference{Name: "agent"})
	agent.Status.LatestRef = &imagev1.ImageRef{Name: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: agentDigest}
	agent.Status.Conditions = []metav1.Condition{ready(metav1.ConditionTrue, meta.SucceededReason, "Latest image tag for ghcr.io/acme/agent resolved to 1.4.2")}
	createWithStatus(t, agent)
	kms := newPolicy(ns, "kms", meta.NamespacedObjectReference{Namespace: "images", Name: "kms"})
	kms.Status.Conditions = []metav1.Condition{ready(metav1.ConditionFalse, "NoMatchingTags", "no tag matches\n>=2.0.0")}
	createWithStatus(t, kms)

	fleet := newAutomation(ns, "fleet")
	fleet.Spec.Git.Push = &uprevv1.PushSpec{Branch: "uprev/updates"}
	fleet.Annotations = map[string]string{uprevv1.HoldReleaseAnnotation: ns + "/app 2.1.0"}
	pushed := metav1.NewTime(now.Add(-5 * time.Minute))
	fleet.Status = uprevv1.UpdateAutomationStatus{
		LastPushCommit: pushCommit,
		LastPushTime:   &pushed,
		Holds: []uprevv1.Hold{
			{Policy: ns + "/agent", Version: "1.4.2", RevertedIn: agentRevert},
			{Policy: ns + "/app", Version: "2.1.0", RevertedIn: appRevert},
		},
		Conditions: []metav1.Condition{ready(metav1.ConditionTrue, meta.SucceededReason, "pushed 3f1c0d9a2b: 1 change, 2 held")},
	}
	createWithStatus(t, fleet)
	paused := newAutomation(ns, "paused")
	paused.Spec.Suspend = true
	createWithStatus(t, paused)
	createWithStatus(t, newFluxAutomation(ns, "flux-system", uprevv1.Hold{Policy: ns + "/web", Version: "3.0.0", RevertedIn: webRevert}))

	prod := newSync(ns, "prod", "local", "eu-1", "us-1")
	prod.Status = uprevv1.SyncStatus{
		LastAttemptedRevision: syncRevision,
		Targets: []uprevv1.TargetStatus{
			{Name: "local", LastAppliedRevision: syncRevision, LastAttemptedRevision: syncRevision, Healthy: true},
			{Name: "eu-1", LastAppliedRevision: syncRevision, LastAttemptedRevision: syncRevision, Healthy: true},
			{Name: "us-1", LastAppliedRevision: "main@sha1:" + oldCommit, LastAttemptedRevision: "main@sha1:" + oldCommit, Healthy: true},
		},
		Steps: []uprevv1.StepStatus{
			{Revision: syncRevision, Targets: 2, OnRevision: 2, Healthy: 2},
			{Revision: "main@sha1:" + oldCommit, Targets: 1, Waiting: 1},
		},
		Conditions: []metav1.Condition{ready(metav1.ConditionFalse, "WaveWaiting", "wave 2 (us-1) waits for wave 1")},
	}
	createWithStatus(t, prod)
	staging := newSync(ns, "staging", "local")
	staging.Spec.Suspend = true
	createWithStatus(t, staging)
}
