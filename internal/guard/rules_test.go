package guard_test

import (
	"errors"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/update"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	revert  = "9ab2c3d4e5f60718293a4b5c6d7e8f9012345678"
)

var (
	agentKey = update.PolicyKey{Namespace: "fleet", Name: "agent"}
	appKey   = update.PolicyKey{Namespace: "fleet", Name: "app"}
	cpKey    = update.PolicyKey{Namespace: "fleet", Name: "cp"}
	semver   = &guard.Ordering{Policy: imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=0.0.0-0"}}}
	edge     = &guard.Ordering{
		Policy:     imagev1.ImagePolicyChoice{Alphabetical: &imagev1.AlphabeticalPolicy{Order: "asc"}},
		FilterTags: &imagev1.TagFilter{Pattern: `^edge-(?P<v>.*)$`, Extract: "$v"},
	}
)

// change is a change of key's marker from the tag old to new, the policy's
// latest ref.
func change(key update.PolicyKey, old, new string) update.Change {
	return update.Change{
		File: "clusters/prod/" + key.Name + ".yaml", Policy: key,
		Old: update.Ref{Tag: old}, New: update.Ref{Tag: new}, Latest: update.Ref{Image: "ghcr.io/acme/" + key.Name, Tag: new},
	}
}

func TestCheck(t *testing.T) {
	agentHold := guard.Hold{Policy: "fleet/agent", Version: "1.4.2", RevertedIn: revert}
	policies := map[update.PolicyKey]guard.Policy{
		agentKey: {Ref: update.Ref{Image: "ghcr.io/acme/agent", Tag: "1.4.2"}, Ordering: semver},
		appKey:   {Ref: update.Ref{Image: "ghcr.io/acme/app", Tag: "1.9.0"}},
		cpKey:    {Ref: update.Ref{Image: "ghcr.io/acme/cp", Tag: "edge-26.11.3"}, Ordering: edge},
	}
	for _, tc := range []struct {
		name           string
		change         update.Change
		allowDowngrade bool
		releases       string
		want           *guard.Refusal
	}{
		{name: "an upgrade", change: change(agentKey, "1.4.1", "1.4.3")},
		{
			name: "a held version", change: change(agentKey, "1.4.1", "1.4.2"),
			want: &guard.Refusal{Kind: guard.RefusalHeld, Policy: agentKey, Hold: agentHold},
		},
		{
			name: "a held version, downgrades allowed", change: change(agentKey, "1.4.1", "1.4.2"), allowDowngrade: true,
			want: &guard.Refusal{Kind: guard.RefusalHeld, Policy: agentKey, Hold: agentHold},
		},
		{name: "a released hold", change: change(agentKey, "1.4.1", "1.4.2"), releases: "fleet/agent 1.4.2"},
		{
			name: "a downgrade", change: change(agentKey, "2.0.0", "1.4.3"),
			want: &guard.Refusal{Kind: guard.RefusalDowngrade, Policy: agentKey, Current: "2.0.0", Selected: "1.4.3"},
		},
		{name: "a downgrade allowed", change: change(agentKey, "2.0.0", "1.4.3"), allowDowngrade: true},
		{name: "a policy without ordering", change: change(appKey, "2.0.0", "1.9.0")},
		{name: "tags the ordering cannot compare", change: change(agentKey, "latest", "1.4.3")},
		{name: "no tag in Git", change: change(agentKey, "", "1.4.3")},
		{
			name: "a downgrade by the policy's own ordering", change: change(cpKey, "edge-26.12.1", "edge-26.11.3"),
			want: &guard.Refusal{Kind: guard.RefusalDowngrade, Policy: cpKey, Current: "edge-26.12.1", Selected: "edge-26.11.3"},
		},
		{name: "an upgrade by the policy's own ordering", change: change(cpKey, "edge-26.10.9", "edge-26.11.3")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rules := guard.New(guard.Input{
				Policies:       policies,
				Holds:          []guard.Hold{agentHold},
				Releases:       guard.ParseReleases(tc.releases),
				AllowDowngrade: tc.allowDowngrade,
			})
			err := rules.Check(tc.change)
			if tc.want == nil {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(guard.KindOf(err)).To(BeZero())
				return
			}
			g.Expect(err).To(Equal(tc.want))
			g.Expect(guard.KindOf(err)).To(Equal(tc.want.Kind))
		})
	}
}

func TestRefusalMessages(t *testing.T) {
	g := NewWithT(t)
	held := &guard.Refusal{Kind: guard.RefusalHeld, Policy: agentKey, Hold: guard.Hold{Policy: "fleet/agent", Version: "1.4.2", RevertedIn: revert}}
	g.Expect(held.Error()).To(Equal("held: 1.4.2 was reverted in 9ab2c3d4e5"))
	down := &guard.Refusal{Kind: guard.RefusalDowngrade, Policy: agentKey, Current: "2.0.0", Selected: "1.4.3"}
	g.Expect(down.Error()).To(Equal("downgrade from 2.0.0 to 1.4.3 refused"))
	g.Expect(guard.RefusalHeld.String()).To(Equal("held"))
	g.Expect(guard.RefusalDowngrade.String()).To(Equal("downgrade"))
	g.Expect(guard.KindOf(errors.New("downgrade from 2.0.0 to 1.4.3 refused"))).To(BeZero(), "kinds are typed, not read from messages")
	g.Expect(guard.KindOf(update.Refusal{Reason: down}.Reason)).To(Equal(guard.RefusalDowngrade))
}

func TestHeld(t *testing.T) {
	hold := func(policy, version string) guard.Hold {
		return guard.Hold{Policy: policy, Version: version, RevertedIn: revert}
	}
	policies := map[update.PolicyKey]guard.Policy{
		agentKey: {Ref: update.Ref{Tag: "1.4.2", Digest: digestA}},
		appKey:   {Ref: update.Ref{Tag: "2.0.0", Digest: digestB}},
	}
	for _, tc := range []struct {
		name     string
		holds    []guard.Hold
		releases string
		want     []guard.Hold
	}{
		{name: "no holds"},
		{name: "on the selected tag", holds: []guard.Hold{hold("fleet/agent", "1.4.2")}, want: []guard.Hold{hold("fleet/agent", "1.4.2")}},
		{name: "on a digest-only update", holds: []guard.Hold{hold("fleet/app", "2.0.0@"+digestB)}, want: []guard.Hold{hold("fleet/app", "2.0.0@"+digestB)}},
		{name: "on another digest", holds: []guard.Hold{hold("fleet/app", "2.0.0@"+digestA)}},
		{name: "on a version the policy moved past", holds: []guard.Hold{hold("fleet/agent", "1.4.1")}},
		{name: "on a policy not selected", holds: []guard.Hold{hold("fleet/web", "1.0.0")}},
		{name: "released", holds: []guard.Hold{hold("fleet/agent", "1.4.2")}, releases: "fleet/agent 1.4.2"},
		{
			name: "one of two released", holds: []guard.Hold{hold("fleet/agent", "1.4.2"), hold("fleet/app", "2.0.0")}, releases: "fleet/app 2.0.0",
			want: []guard.Hold{hold("fleet/agent", "1.4.2")},
		},
		{name: "all released", holds: []guard.Hold{hold("fleet/agent", "1.4.2"), hold("fleet/app", "2.0.0")}, releases: "*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := guard.New(guard.Input{Policies: policies, Holds: tc.holds, Releases: guard.ParseReleases(tc.releases)})
			NewWithT(t).Expect(rules.Held()).To(Equal(tc.want))
		})
	}
}

func TestCRDRefusal(t *testing.T) {
	agentHold := guard.Hold{Policy: "fleet/agent", Version: "1.4.2", RevertedIn: revert}
	policies := map[update.PolicyKey]guard.Policy{
		agentKey: {Ref: update.Ref{Tag: "1.4.2"}, Ordering: semver},
		appKey:   {Ref: update.Ref{Tag: "1.9.0"}, Ordering: semver},
	}
	rules := guard.New(guard.Input{Policies: policies, Holds: []guard.Hold{agentHold}})
	downgrade := rules.Check(change(appKey, "2.0.0", "1.9.0"))
	refused := []update.Refusal{{Change: change(appKey, "2.0.0", "1.9.0"), Reason: downgrade}}
	for _, tc := range []struct {
		name    string
		key     update.PolicyKey
		refused []update.Refusal
		want    guard.RefusalKind
	}{
		{name: "a held version, before the rewrite", key: agentKey, want: guard.RefusalHeld},
		{name: "a held version, after it", key: agentKey, refused: refused, want: guard.RefusalHeld},
		{name: "a version free before the rewrite", key: appKey},
		{name: "a refused change", key: appKey, refused: refused, want: guard.RefusalDowngrade},
		{name: "another policy's refused change", key: cpKey, refused: refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := rules.CRDRefusal(tc.key, tc.refused)
			if tc.want == 0 {
				g.Expect(r).To(BeNil())
				return
			}
			g.Expect(r).NotTo(BeNil())
			g.Expect(r.Kind).To(Equal(tc.want))
			g.Expect(r.Policy).To(Equal(tc.key))
		})
	}
}

func TestPoliciesOf(t *testing.T) {
	g := NewWithT(t)
	ready := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	notReady := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse}}
	choice := imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}}
	filter := &imagev1.TagFilter{Pattern: "^v(?P<v>.*)$", Extract: "$v"}
	pol := func(name string, ref *imagev1.ImageRef, conditions []metav1.Condition) imagev1.ImagePolicy {
		p := imagev1.ImagePolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name},
			Spec:       imagev1.ImagePolicySpec{Policy: choice, FilterTags: filter},
		}
		p.Status.LatestRef = ref
		p.Status.Conditions = conditions
		return p
	}
	policies, notReadyNames := guard.PoliciesOf([]imagev1.ImagePolicy{
		pol("agent", &imagev1.ImageRef{Name: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: digestA}, ready),
		pol("pending", nil, ready),
		pol("failing", &imagev1.ImageRef{Name: "ghcr.io/acme/app", Tag: "1.0.0"}, notReady),
	})
	g.Expect(policies).To(Equal(map[update.PolicyKey]guard.Policy{
		agentKey: {Ref: update.Ref{Image: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: digestA}, Ordering: &guard.Ordering{Policy: choice, FilterTags: filter}},
	}))
	g.Expect(notReadyNames).To(Equal([]string{"fleet/pending", "fleet/failing"}))
}
