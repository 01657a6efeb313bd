package gate

import (
	"slices"
	"time"

	"github.com/uprev-dev/uprev/internal/registry"
)

// Promoted is one target of an earlier stage that runs a version healthy:
// the evidence a promotion gate let the version through on.
type Promoted struct {
	// Sync names the earlier stage's Sync.
	Sync string
	// Target names its target.
	Target string
	// HealthySince is when the target became healthy on the revision
	// that runs the version.
	HealthySince time.Time
}

// PromotedBy returns the targets of g's promotion that run tag of image,
// at digest when digest is not empty (a target whose manifests pin no
// digest for tag counts), and are healthy, in the gate's order; nil when
// g has no promotion. They are what a promotion gate reads (see hold).
func PromotedBy(g Gate, image, tag, digest string) []Promoted {
	if g.Promotion == nil {
		return nil
	}
	canonical, err := registry.CanonicalName(image)
	if err != nil {
		canonical = image
	}
	st := stageOf(g, canonical)
	var out []Promoted
	for _, t := range st.targets {
		ds, runs := t.digests[tag]
		if !runs || t.since.IsZero() {
			continue
		}
		if digest != "" && !slices.Contains(ds, digest) && !slices.Contains(ds, "") {
			continue
		}
		out = append(out, Promoted{Sync: st.sync, Target: t.name, HealthySince: t.since})
	}
	return out
}
