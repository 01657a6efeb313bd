// Package gate selects the latest version of an ImagePolicy that passes the
// release gates set on it (uprev.dev/v1alpha1 ReleaseGate): the newest
// version its own rules pick among those every gate lets through, and,
// for a person to read, the newer versions that wait and why.
//
// The package is pure: it takes the policy's spec and image, the stored
// tags with when a scan first saw each, the gates (with what the targets
// of a promotion's Sync report) and the time, and returns a Selection or
// the errors of package policy.
//
// A gate here is a test of one version that needs nothing but the version
// (minReleaseAge: its first-seen time; promotion: whether each target runs
// its tag, a map look-up), so held versions are left out before the policy
// orders the rest: the selection is exact however many versions wait, at
// the cost of one pass over the tags, and no walk over candidates is
// needed. The one test that needs more is a promotion's digest, known only
// for the selected tag: Selection.DigestHold makes it. What waits is
// listed newest first and bounded by MaxWaiting.
package gate

import (
	"errors"
	"fmt"
	"slices"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"

	"github.com/uprev-dev/uprev/internal/policy"
	"github.com/uprev-dev/uprev/internal/registry"
)

// MinReleaseAge is the name of the gate that holds a version back until it
// is old enough, counted from when a scan first saw its tag.
const MinReleaseAge = "minReleaseAge"

// Verify is the name of the gate that refuses a version whose signature
// does not verify (ReleaseGate spec.verify). The caller verifies, newest
// first, what Select selects, and selects again with the refused versions
// in Gate.Refused, until a version passes.
const Verify = "verify"

// Attestations is the name of the gate that refuses a version whose
// attestations (provenance, SBOM, vulnerability scan) do not say what
// ReleaseGate spec.attestations asks; refused as Verify is.
const Attestations = "attestations"

// MaxWaiting bounds the waiting versions a Selection lists: the newest
// ones. The selection itself is not bounded.
const MaxWaiting = 100

// Gate is what one ReleaseGate asks of the policies it selects.
type Gate struct {
	// Name names the ReleaseGate.
	Name string
	// MinReleaseAge is how long after a scan first saw a tag its version
	// may be selected; 0 sets no age.
	MinReleaseAge time.Duration
	// Promotion, when set, lets a version through only once an earlier
	// stage runs it healthy.
	Promotion *PromotionGate
	// Refused are the versions this gate's signature verification
	// refused, by tag, each with its Hold (Kind Verify, EligibleAt when the
	// signatures are read again).
	Refused map[string]Hold
}

// Hold is one gate holding one version back.
type Hold struct {
	// Gate names the ReleaseGate.
	Gate string
	// Kind is the gate that holds it: MinReleaseAge, Promotion, Verify or
	// Attestations.
	Kind string
	// EligibleAt is when this gate lets the version through; zero when no
	// time will (a promotion waiting for a target to run the version or
	// to be healthy).
	EligibleAt time.Time
	// Reason says why, for a person.
	Reason string
}

// Waiting is a version newer than the selection that gates hold back.
type Waiting struct {
	// Tag is the version's tag.
	Tag string
	// Holds are the gates holding it, the one that lets it through last
	// first.
	Holds []Hold
}

// EligibleAt is when every gate lets the version through; zero when no
// time will by itself.
func (w Waiting) EligibleAt() time.Time {
	return w.Holds[0].EligibleAt
}

// Selection is the result of Select.
type Selection struct {
	// Tag is the selected tag; empty when gates hold back every version
	// the policy would select.
	Tag string
	// Waiting are the versions ranked above Tag that gates hold back,
	// newest first, at most MaxWaiting.
	Waiting []Waiting
	// NextEligibleAt is the earliest time a held version becomes
	// eligible, when the selection must be made again; zero when none
	// becomes eligible by time alone.
	NextEligibleAt time.Time
	// Digest is the digest of Tag whose signature a Verify gate checked;
	// empty when no gate verifies signatures.
	Digest string
	// Signers name, by ReleaseGate, what the signature of Digest that
	// gate's verify accepted was verified with (signature.Verdict's
	// SignedBy); nil when no gate verifies signatures.
	Signers map[string]string

	// stages are the promotion gates, for DigestHold.
	stages []*stage
}

// DigestHold returns the hold on the selected tag at digest, the digest
// the policy reflects for it, if a promotion gate's target runs the tag at
// another digest only: the tag moved after the earlier stage took it. An
// empty digest (a policy that reflects none) is never held.
func (s Selection) DigestHold(digest string) (Hold, bool) {
	if digest == "" || s.Tag == "" {
		return Hold{}, false
	}
	for _, st := range s.stages {
		if h, ok := st.digestHold(s.Tag, digest); ok {
			return h, true
		}
	}
	return Hold{}, false
}

// Select returns the newest version that choice and filter select from
// tags of image and that every gate lets through at now. With no gates it
// selects as policy.SelectLatest does. The errors are those of
// policy.SelectLatest, except that a policy.ErrNoMatch while versions wait
// is not an error but a Selection with no Tag.
func Select(choice imagev1.ImagePolicyChoice, filter *imagev1.TagFilter, image string, tags []registry.SeenTag, gates []Gate, now time.Time) (Selection, error) {
	var sel Selection
	canonical, err := registry.CanonicalName(image)
	if err != nil {
		canonical = image
	}
	for _, g := range gates {
		if g.Promotion != nil {
			sel.stages = append(sel.stages, stageOf(g, canonical))
		}
	}
	passing := make([]string, 0, len(tags))
	var held []string
	holds := map[string][]Hold{}
	for _, t := range tags {
		hs := holdsOf(t, gates, sel.stages, now)
		if len(hs) == 0 {
			passing = append(passing, t.Name)
			continue
		}
		held = append(held, t.Name)
		holds[t.Name] = hs
		if at := hs[0].EligibleAt; !at.IsZero() && (sel.NextEligibleAt.IsZero() || at.Before(sel.NextEligibleAt)) {
			sel.NextEligibleAt = at
		}
	}
	tag, err := policy.SelectLatest(choice, filter, passing)
	switch {
	case err == nil:
		sel.Tag = tag
	case !errors.Is(err, policy.ErrNoMatch) || len(held) == 0:
		return Selection{}, err
	}
	if sel.Waiting, err = waiting(choice, filter, held, holds, sel.Tag); err != nil {
		return Selection{}, err
	}
	if sel.Tag == "" && len(sel.Waiting) == 0 {
		return Selection{}, fmt.Errorf("%w: %d tags wait at gates, none of them in the policy's range", policy.ErrNoMatch, len(held))
	}
	return sel, nil
}

// holdsOf returns the gates and promotion stages that hold t back at now,
// the one that lets it through last first (one that no time will first).
func holdsOf(t registry.SeenTag, gates []Gate, stages []*stage, now time.Time) []Hold {
	var hs []Hold
	for _, st := range stages {
		if h, ok := st.hold(t.Name, now); ok {
			hs = append(hs, h)
		}
	}
	for _, g := range gates {
		if h, ok := g.Refused[t.Name]; ok {
			hs = append(hs, h)
		}
		if g.MinReleaseAge <= 0 {
			continue
		}
		if at := t.FirstSeen.Add(g.MinReleaseAge); at.After(now) {
			hs = append(hs, Hold{Gate: g.Name, Kind: MinReleaseAge, EligibleAt: at,
				Reason: fmt.Sprintf("first seen %s, younger than %s", t.FirstSeen.UTC().Format(time.RFC3339), g.MinReleaseAge)})
		}
	}
	slices.SortStableFunc(hs, func(a, b Hold) int {
		switch {
		case a.EligibleAt.IsZero() || b.EligibleAt.IsZero():
			return boolRank(b.EligibleAt.IsZero()) - boolRank(a.EligibleAt.IsZero())
		default:
			return b.EligibleAt.Compare(a.EligibleAt)
		}
	})
	return hs
}

// waiting returns the held tags the policy ranks above selected (all it
// would select when selected is empty), newest first, at most MaxWaiting.
func waiting(choice imagev1.ImagePolicyChoice, filter *imagev1.TagFilter, held []string, holds map[string][]Hold, selected string) ([]Waiting, error) {
	if len(held) == 0 {
		return nil, nil
	}
	s, err := policy.NewSelector(choice)
	if err != nil {
		return nil, err
	}
	f, err := policy.NewFilter(filter)
	if err != nil {
		return nil, err
	}
	filtered := f.Apply(held)
	newest, err := s.Newest(filtered.Values, MaxWaiting)
	if err != nil {
		return nil, err
	}
	var floor string
	if selected != "" {
		floor, _ = f.Extract(selected)
	}
	out := make([]Waiting, 0, len(newest))
	for _, v := range newest {
		if floor != "" {
			if rank, err := s.Compare(v, floor); err != nil || rank <= 0 {
				break
			}
		}
		tag := filtered.Original(v)
		out = append(out, Waiting{Tag: tag, Holds: holds[tag]})
	}
	return out, nil
}

// boolRank orders false before true.
func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
