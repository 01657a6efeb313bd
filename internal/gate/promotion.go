package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uprev-dev/uprev/internal/apply"
)

// Promotion is the name of the gate that holds a version back until the
// targets of an earlier stage's Sync run it and have been healthy for
// long enough.
const Promotion = "promotion"

// PromotionGate lets a version through once every one of Targets runs it
// and has been healthy for HealthyFor.
type PromotionGate struct {
	// Sync names the Sync of the earlier stage, for people.
	Sync string
	// Targets are the Sync targets that must run the version, as their
	// status reports them. A listed target with no status yet is a Target
	// with its Name alone.
	Targets []Target
	// HealthyFor is how long each target must have been healthy on the
	// version; 0 asks for healthy once.
	HealthyFor time.Duration
}

// Target is what one Sync target reports: the images of the revision it
// applied and since when it has been healthy on it.
type Target struct {
	// Name names the target.
	Name string
	// Components are the images of the revision the target applied.
	Components []Component
	// HealthySince is when the target became healthy on that revision;
	// zero while it is not healthy.
	HealthySince time.Time
}

// Component is one image a target runs, as its manifests name it.
type Component struct {
	// Image is the image repository, as written in the manifests.
	Image string
	// Tag is the image's tag; empty when the manifests pin a digest alone.
	Tag string
	// Digest is the digest the manifests pin, when they pin one.
	Digest string
}

// stage is a promotion gate read for one image: what each target runs of
// it, so that testing a version is a map look-up per target.
type stage struct {
	gate    string
	sync    string
	targets []stageTarget
	healthy time.Duration
}

// stageTarget is one target of a stage.
type stageTarget struct {
	name string
	// digests are the digests the target runs of each tag of the image;
	// an empty digest where the manifests pin none.
	digests map[string][]string
	// notRunning is the hold of a version the target does not run,
	// shared by all of them.
	notRunning Hold
	since      time.Time
}

// stageOf reads g for the image whose canonical name is canonical.
func stageOf(g Gate, canonical string) *stage {
	p := g.Promotion
	st := &stage{gate: g.Name, sync: p.Sync, healthy: p.HealthyFor, targets: make([]stageTarget, 0, len(p.Targets))}
	for _, t := range p.Targets {
		tt := stageTarget{name: t.Name, digests: map[string][]string{}, since: t.HealthySince}
		var runs, pinned []string
		for _, c := range apply.RunningOf(componentsOf(t), canonical) {
			if c.Tag == "" {
				// Pinned by digest alone: runs the image, but no version
				// a candidate tag could be.
				pinned = append(pinned, c.Digest)
				continue
			}
			if _, ok := tt.digests[c.Tag]; !ok {
				runs = append(runs, c.Tag)
			}
			tt.digests[c.Tag] = append(tt.digests[c.Tag], c.Digest)
		}
		reason := fmt.Sprintf("%s runs %s", t.Name, strings.Join(runs, ", "))
		switch {
		case len(t.Components) == 0 && t.HealthySince.IsZero():
			reason = fmt.Sprintf("%s of Sync %s has applied nothing healthy yet", t.Name, p.Sync)
		case len(runs) == 0 && len(pinned) > 0:
			reason = fmt.Sprintf("%s runs %s pinned by digest alone (%s), no tagged version", t.Name, canonical, strings.Join(pinned, ", "))
		case len(runs) == 0:
			reason = fmt.Sprintf("%s runs no version of %s", t.Name, canonical)
		}
		tt.notRunning = Hold{Gate: g.Name, Kind: Promotion, Reason: reason}
		st.targets = append(st.targets, tt)
	}
	return st
}

// componentsOf returns the components of t as internal/apply names them.
func componentsOf(t Target) []apply.Component {
	cs := make([]apply.Component, len(t.Components))
	for i, c := range t.Components {
		cs[i] = apply.Component(c)
	}
	return cs
}

// hold returns the hold of this stage on tag at now, if it holds it back:
// a target that does not run it or is not healthy holds it with no time
// it is eligible at; targets healthy for less than HealthyFor hold it
// until the last of them has been healthy long enough.
func (st *stage) hold(tag string, now time.Time) (Hold, bool) {
	var until time.Time
	var waitsFor string
	for i := range st.targets {
		t := &st.targets[i]
		if _, ok := t.digests[tag]; !ok {
			return t.notRunning, true
		}
		if t.since.IsZero() {
			return Hold{Gate: st.gate, Kind: Promotion, Reason: fmt.Sprintf("%s runs %s but is not healthy", t.name, tag)}, true
		}
		if at := t.since.Add(st.healthy); at.After(now) && at.After(until) {
			until, waitsFor = at, t.name
		}
	}
	if until.IsZero() {
		return Hold{}, false
	}
	i := slices.IndexFunc(st.targets, func(t stageTarget) bool { return t.name == waitsFor })
	return Hold{Gate: st.gate, Kind: Promotion, EligibleAt: until,
		Reason: fmt.Sprintf("%s healthy on %s since %s, for less than %s", waitsFor, tag, st.targets[i].since.UTC().Format(time.RFC3339), st.healthy)}, true
}

// digestHold returns the hold of this stage on tag at digest, if a target
// runs tag at another digest only: the tag was moved after the earlier
// stage took it, and what it points at now has not run there. A target
// whose manifests pin no digest for tag does not hold it.
func (st *stage) digestHold(tag, digest string) (Hold, bool) {
	for _, t := range st.targets {
		ds := t.digests[tag]
		if slices.Contains(ds, digest) || slices.Contains(ds, "") {
			continue
		}
		return Hold{Gate: st.gate, Kind: Promotion,
			Reason: fmt.Sprintf("%s runs %s at %s, the tag now points at %s", t.name, tag, strings.Join(ds, ", "), digest)}, true
	}
	return Hold{}, false
}
