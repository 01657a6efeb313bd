package gate_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/uprev-dev/uprev/internal/gate"
	"github.com/uprev-dev/uprev/internal/policy"
	"github.com/uprev-dev/uprev/internal/registry"
)

func itoa(i int) string { return strconv.Itoa(i) }

// benchTags are 10,000 semantic versions, the newest 1,000 first seen an
// hour ago and the rest ten days ago.
func benchTags() ([]registry.SeenTag, []string) {
	seenTags := make([]registry.SeenTag, 0, 10000)
	names := make([]string, 0, 10000)
	for i := range 10000 {
		tag := strconv.Itoa(i/100) + "." + strconv.Itoa(i%100) + ".0"
		ago := 240 * time.Hour
		if i >= 9000 {
			ago = time.Hour
		}
		seenTags = append(seenTags, registry.SeenTag{Name: tag, FirstSeen: now.Add(-ago)})
		names = append(names, tag)
	}
	return seenTags, names
}

// BenchmarkSelectWithoutGates is today's selection: 10,000 tags, no gates.
func BenchmarkSelectWithoutGates(b *testing.B) {
	_, names := benchTags()
	for b.Loop() {
		if _, err := policy.SelectLatest(semver(">=0.0.0"), nil, names); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelectAgeGateHoldsNewest1000 selects over 10,000 tags with an
// age gate that holds back the newest 1,000.
func BenchmarkSelectAgeGateHoldsNewest1000(b *testing.B) {
	seenTags, _ := benchTags()
	gates := []gate.Gate{{Name: "prod", MinReleaseAge: 72 * time.Hour}}
	for b.Loop() {
		sel, err := gate.Select(semver(">=0.0.0"), nil, image, seenTags, gates, now)
		if err != nil || sel.Tag != "89.99.0" || len(sel.Waiting) != gate.MaxWaiting {
			b.Fatalf("selected %q with %d waiting: %v", sel.Tag, len(sel.Waiting), err)
		}
	}
}

// BenchmarkSelectPromotionOf10000 selects over 10,000 tags with a
// promotion gate whose two staging targets run one version, healthy: every
// other tag is held back, the newest 100 of them listed as waiting.
func BenchmarkSelectPromotionOf10000(b *testing.B) {
	seenTags, _ := benchTags()
	staging := func(name string) gate.Target {
		return gate.Target{Name: name, HealthySince: now.Add(-48 * time.Hour),
			Components: []gate.Component{{Image: image, Tag: "50.0.0"}, {Image: "ghcr.io/acme/other", Tag: "1.0.0"}}}
	}
	gates := []gate.Gate{{Name: "prod", Promotion: &gate.PromotionGate{Sync: "staging", HealthyFor: 24 * time.Hour,
		Targets: []gate.Target{staging("eu-staging"), staging("us-staging")}}}}
	for b.Loop() {
		sel, err := gate.Select(semver(">=0.0.0"), nil, image, seenTags, gates, now)
		if err != nil || sel.Tag != "50.0.0" || len(sel.Waiting) != gate.MaxWaiting {
			b.Fatalf("selected %q with %d waiting: %v", sel.Tag, len(sel.Waiting), err)
		}
	}
}
