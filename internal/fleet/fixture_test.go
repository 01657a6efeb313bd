package fleet

import (
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/apply"
)

// digestA is an image digest.
const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// digestC is another image digest.
const digestC = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"

// ns is the namespace of the fixture's objects.
const ns = "uprev-system"

// semverPolicy returns an ImagePolicy on image with a semver range and,
// unless tag is empty, a latest ref.
func semverPolicy(name, image, tag, digest string) imagev1.ImagePolicy {
	p := imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Name: name},
			Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=0.1.0"}},
		},
	}
	if tag != "" {
		p.Status.LatestRef = &imagev1.ImageRef{Name: image, Tag: tag, Digest: digest}
	}
	return p
}

// runs returns the components of a target running images.
func runs(images ...string) []uprevv1.AppliedComponent {
	var out []uprevv1.AppliedComponent
	for _, image := range images {
		c, err := apply.ParseImage(image)
		if err != nil {
			panic(err)
		}
		out = append(out, uprevv1.AppliedComponent(c))
	}
	return out
}

// target returns the status of a target that last tried revision tried,
// last applied revision applied, and runs images.
func target(name, tried, applied string, images ...string) uprevv1.TargetStatus {
	return uprevv1.TargetStatus{Name: name, LastAttemptedRevision: tried, LastAppliedRevision: applied, Components: runs(images...)}
}

// fleetInputs is a fleet mid-rollout. Sync prod rolls out main@sha1:2, which
// brings agent 1.4.2, in three waves: local applied it, eu-1 failed to, and
// us-1 waits. Its web 2.1.0 was reverted (held) after local and eu-1 got
// the revert and us-1 did not. It runs kms 2.3.0, above the policy's
// 2.2.0 (a refused downgrade), and redis as written without a registry.
// Sync staging, in another namespace, runs agent 1.4.2 built twice (an
// older digest) on a target also called local, and has a target that never
// applied anything. Policy unused deploys nowhere; policy new has no latest
// ref yet and takes its image from its ImageRepository.
func fleetInputs() Inputs {
	const rev1, rev2 = "main@sha1:1", "main@sha1:2"
	newPolicy := semverPolicy("new", "", "", "")
	return Inputs{
		Policies: []imagev1.ImagePolicy{
			semverPolicy("web", "ghcr.io/acme/web", "2.1.0", ""),
			semverPolicy("agent", "ghcr.io/acme/agent", "1.4.2", digestA),
			semverPolicy("kms", "registry.example.com/kms", "2.2.0", ""),
			semverPolicy("redis", "docker.io/library/redis", "7.2.4", ""),
			semverPolicy("unused", "ghcr.io/acme/unused", "3.0.0", ""),
			newPolicy,
		},
		Repositories: []imagev1.ImageRepository{{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new"},
			Spec:       imagev1.ImageRepositorySpec{Image: "ghcr.io/acme/new"},
		}},
		Automations: []uprevv1.UpdateAutomation{{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
			Status: uprevv1.UpdateAutomationStatus{Holds: []uprevv1.Hold{
				{Policy: ns + "/web", Version: "2.1.0", RevertedIn: "9ab2c3d"},
				{Policy: ns + "/agent", Version: "1.3.0", RevertedIn: "77aa01b"},
			}},
		}},
		Syncs: []uprevv1.Sync{
			{
				ObjectMeta: metav1.ObjectMeta{Namespace: "staging", Name: "staging"},
				Spec:       uprevv1.SyncSpec{Targets: []uprevv1.Target{{Name: "local"}, {Name: "edge-1"}}},
				Status: uprevv1.SyncStatus{LastAttemptedRevision: rev2, Targets: []uprevv1.TargetStatus{
					target("local", rev2, rev2, "ghcr.io/acme/agent:1.4.2@"+digestC),
				}},
			},
			{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
				Spec: uprevv1.SyncSpec{
					Targets: []uprevv1.Target{{Name: "us-1"}, {Name: "eu-1"}, {Name: "local"}},
					Rollout: &uprevv1.Rollout{Waves: [][]string{{"local"}, {"eu-1"}}},
				},
				Status: uprevv1.SyncStatus{LastAttemptedRevision: rev2, Targets: []uprevv1.TargetStatus{
					target("local", rev2, rev2, "ghcr.io/acme/agent:1.4.2@"+digestA, "ghcr.io/acme/web:2.0.0",
						"registry.example.com/kms:2.3.0", "redis:7.2.4", "ghcr.io/acme/new:0.1.0"),
					target("eu-1", rev2, rev1, "ghcr.io/acme/agent:1.4.1", "ghcr.io/acme/web:2.0.0",
						"registry.example.com/kms:2.3.0", "redis:7.2.4"),
					target("us-1", rev1, rev1, "ghcr.io/acme/agent:1.4.1", "ghcr.io/acme/web:2.1.0",
						"registry.example.com/kms:2.1.0", "docker.io/library/redis:7.2.4"),
				}},
			},
		},
		Gates: []uprevv1.ReleaseGate{
			// Another namespace's gate of a policy of the same name gates
			// nothing here.
			{
				ObjectMeta: metav1.ObjectMeta{Namespace: "staging", Name: "prod"},
				Status: uprevv1.ReleaseGateStatus{Policies: []uprevv1.GatedPolicy{{Name: "kms", Waiting: []uprevv1.WaitingVersion{
					{Tag: "9.9.9", Gate: "minReleaseAge", EligibleAt: &eligibleKMS},
				}}}},
			},
			{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
				Status: uprevv1.ReleaseGateStatus{Policies: []uprevv1.GatedPolicy{
					{Name: "agent", Latest: &uprevv1.GatedVersion{Tag: "1.4.2"}, Waiting: []uprevv1.WaitingVersion{
						{Tag: "1.5.1", Gate: "minReleaseAge", EligibleAt: &eligibleAgent},
						{Tag: "1.5.0", Gate: "minReleaseAge", EligibleAt: &eligibleKMS},
					}},
					{Name: "redis", Latest: &uprevv1.GatedVersion{Tag: "7.2.4"}},
				}},
			},
		},
		Now: fixtureNow,
	}
}

// fixtureNow is the fixture's clock; agent's 1.5.1 is eligible 2 days and
// 4 hours later.
var (
	fixtureNow    = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	eligibleAgent = metav1.NewTime(fixtureNow.Add(52*time.Hour + 10*time.Second))
	eligibleKMS   = metav1.NewTime(fixtureNow.Add(70 * time.Hour))
)
