package guard

import (
	"errors"
	"fmt"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/policy"
	"github.com/uprev-dev/uprev/internal/update"
)

// Ordering is how a policy ranks versions: its spec.policy and
// spec.filterTags. The guard uses it to recognise downgrades.
type Ordering struct {
	// Policy is the policy choice (semver, alphabetical or numerical).
	Policy imagev1.ImagePolicyChoice
	// FilterTags, when set, extracts the part of each tag to order by.
	FilterTags *imagev1.TagFilter
}

// Policy is one policy a run may write: its latest reference and, when
// known, its ordering.
type Policy struct {
	// Ref is the policy's latest reference (status.latestRef).
	Ref update.Ref
	// Ordering ranks versions for downgrade checks; nil skips the check for
	// this policy.
	Ordering *Ordering
}

// PoliciesOf turns ImagePolicy objects into the policies a run writes:
// those Ready and with a latest ref. The others are named, as
// namespace/name, in notReady: a run skips them rather than write an empty
// version.
func PoliciesOf(items []imagev1.ImagePolicy) (policies map[update.PolicyKey]Policy, notReady []string) {
	policies = make(map[update.PolicyKey]Policy, len(items))
	for i := range items {
		pol := &items[i]
		key := update.PolicyKey{Namespace: pol.Namespace, Name: pol.Name}
		ref := pol.Status.LatestRef
		if ref == nil || !apimeta.IsStatusConditionTrue(pol.Status.Conditions, "Ready") {
			notReady = append(notReady, key.String())
			continue
		}
		policies[key] = Policy{
			Ref:      update.Ref{Image: ref.Name, Tag: ref.Tag, Digest: ref.Digest},
			Ordering: &Ordering{Policy: pol.Spec.Policy, FilterTags: pol.Spec.FilterTags},
		}
	}
	return policies, notReady
}

// SourcesOf turns ReleaseSource objects into policies a run writes, as
// PoliciesOf does ImagePolicies: those Ready and with a selected version,
// keyed with update.SourceKind, their version as the reference's Tag and
// their spec.policy and spec.filterTags as ordering. assets holds the URL
// and hash of each pinned asset, for update.Options.Assets. The others
// are named in notReady.
func SourcesOf(items []uprevv1.ReleaseSource) (policies map[update.PolicyKey]Policy, assets map[update.AssetKey]string, notReady []string) {
	policies = make(map[update.PolicyKey]Policy, len(items))
	assets = map[update.AssetKey]string{}
	for i := range items {
		rs := &items[i]
		key := update.PolicyKey{Namespace: rs.Namespace, Name: rs.Name, Kind: update.SourceKind}
		latest := rs.Status.Latest
		if latest == nil || !apimeta.IsStatusConditionTrue(rs.Status.Conditions, "Ready") {
			notReady = append(notReady, key.String())
			continue
		}
		policies[key] = Policy{
			Ref:      update.Ref{Tag: latest.Version},
			Ordering: &Ordering{Policy: rs.Spec.Policy, FilterTags: rs.Spec.FilterTags},
		}
		for _, a := range latest.Assets {
			assets[update.AssetKey{Source: key, Kind: update.KindAssetURL, Asset: a.Name}] = a.URL
			assets[update.AssetKey{Source: key, Kind: update.KindAssetSHA256, Asset: a.Name}] = a.SHA256
		}
	}
	return policies, assets, notReady
}

// RefusalKind tells the guard's refusals apart.
type RefusalKind int

const (
	// RefusalHeld refuses a change to a version that a revert put on hold.
	RefusalHeld RefusalKind = iota + 1
	// RefusalDowngrade refuses a change to a version that the policy ranks
	// below the one in Git.
	RefusalDowngrade
)

// String returns "held" or "downgrade", the words `uprev plan` prints.
func (k RefusalKind) String() string {
	switch k {
	case RefusalHeld:
		return "held"
	case RefusalDowngrade:
		return "downgrade"
	default:
		return fmt.Sprintf("RefusalKind(%d)", int(k))
	}
}

// Refusal is why the guard refuses a change, or the CRDs of a policy. Check
// returns it as the error that update.RewriteMarkers records in
// update.Refusal.Reason; KindOf finds it there again.
type Refusal struct {
	// Kind is what rule refused.
	Kind RefusalKind
	// Policy is the policy whose version was refused.
	Policy update.PolicyKey
	// Hold is the hold in force, for RefusalHeld.
	Hold Hold
	// Current is the tag in Git, for RefusalDowngrade.
	Current string
	// Selected is the lower tag the policy selects, for RefusalDowngrade.
	Selected string
}

// Error describes the refusal: `held: <version> was reverted in <sha>` or
// `downgrade from <current> to <selected> refused`.
func (r *Refusal) Error() string {
	if r.Kind == RefusalHeld {
		return fmt.Sprintf("held: %s was reverted in %s", r.Hold.Version, r.Hold.RevertedIn[:min(len(r.Hold.RevertedIn), 10)])
	}
	return fmt.Sprintf("downgrade from %s to %s refused", r.Current, r.Selected)
}

// KindOf returns the kind of the guard's refusal in err's chain, such as an
// update.Refusal's Reason, and 0 when err is no refusal of the guard.
func KindOf(err error) RefusalKind {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Kind
	}
	return 0
}

// Input is what the rules of one run are made of. The controller reads it
// from an UpdateAutomation, its policies and its kept clone; `uprev plan`
// from a cluster or a refs file, flags and a checkout.
type Input struct {
	// Policies are the selected, ready policies by key.
	Policies map[update.PolicyKey]Policy
	// Holds are the holds found in Git (ReadHolds). Only those on a
	// policy's latest version that Releases does not release are in force.
	Holds []Hold
	// Releases are the holds released by the automation's annotation
	// uprev.dev/release-holds.
	Releases Releases
	// AllowDowngrade lets changes to lower versions through, as
	// spec.allowDowngrade does.
	AllowDowngrade bool
}

// Rules decide, for one run, which changes may be written.
type Rules struct {
	in   Input
	held []Hold
}

// New returns the rules of a run with the input in.
func New(in Input) *Rules {
	r := &Rules{in: in}
	for _, h := range in.Holds {
		p, ok := in.Policies[parseKey(h.Policy)]
		if ok && h.On(p.Ref) && !in.Releases.Released(h) {
			r.held = append(r.held, h)
		}
	}
	return r
}

// Held returns the holds in force, in the order they were found: a policy
// selects the held version and the hold is not released. Holds on versions
// the policies moved past no longer matter.
func (r *Rules) Held() []Hold {
	return r.held
}

// Refs returns the latest reference of each policy, as
// update.Options.Policies takes them.
func (r *Rules) Refs() map[update.PolicyKey]update.Ref {
	refs := make(map[update.PolicyKey]update.Ref, len(r.in.Policies))
	for key, p := range r.in.Policies {
		refs[key] = p.Ref
	}
	return refs
}

// Check is the update.Guard of the run. It refuses, with a *Refusal, a
// change to a held version (RefusalHeld) and, unless downgrades are allowed,
// a change to a tag the policy's ordering ranks below the one in Git
// (RefusalDowngrade). Tags the ordering cannot compare, and policies without
// an ordering, are let through.
func (r *Rules) Check(c update.Change) error {
	if h, ok := r.heldAt(c.Policy, c.Latest); ok {
		return &Refusal{Kind: RefusalHeld, Policy: c.Policy, Hold: h}
	}
	if r.in.AllowDowngrade || c.Old.Tag == "" || c.Old.Tag == c.New.Tag {
		return nil
	}
	o := r.in.Policies[c.Policy].Ordering
	if o == nil {
		return nil
	}
	order, err := policy.Compare(o.Policy, o.FilterTags, c.Old.Tag, c.New.Tag)
	if err == nil && order > 0 {
		return &Refusal{Kind: RefusalDowngrade, Policy: c.Policy, Current: c.Old.Tag, Selected: c.New.Tag}
	}
	return nil
}

// CRDRefusal returns why the CRD bundles that ship with the version a
// policy selects must be left as they are, or nil when they may be written:
// a version and its CRDs move together or not at all. Before the rewrite
// (refused nil) it refuses the CRDs of a held version, which need not even
// be read; after it, the CRDs of a policy with any refused change in
// refused.
func (r *Rules) CRDRefusal(key update.PolicyKey, refused []update.Refusal) *Refusal {
	if p, ok := r.in.Policies[key]; ok {
		if h, held := r.heldAt(key, p.Ref); held {
			return &Refusal{Kind: RefusalHeld, Policy: key, Hold: h}
		}
	}
	for _, f := range refused {
		var refusal *Refusal
		if f.Change.Policy == key && errors.As(f.Reason, &refusal) {
			return refusal
		}
	}
	return nil
}

// heldAt returns the hold in force on ref of policy key, if any.
func (r *Rules) heldAt(key update.PolicyKey, ref update.Ref) (Hold, bool) {
	for _, h := range r.held {
		if parseKey(h.Policy) == key && h.On(ref) {
			return h, true
		}
	}
	return Hold{}, false
}

// parseKey parses `namespace/name` (`ReleaseSource/namespace/name` for a
// source).
func parseKey(s string) update.PolicyKey {
	return update.ParsePolicyKey(s)
}
