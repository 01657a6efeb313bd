package v1alpha1

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// HoldsAnnotation is where the manager publishes the holds of a Flux
// ImageUpdateAutomation, whose status has no field for them: compact JSON
// of PublishedHolds, owned by the manager's field manager (uprev), written
// with a merge patch only when the holds in force change, and removed when
// none are left. An UpdateAutomation reports its holds in status.holds
// instead and never carries it.
const HoldsAnnotation = "status.uprev.dev/holds"

// MaxPublishedHolds bounds the holds HoldsAnnotation lists: past it, the
// first MaxPublishedHolds (by policy and version) are listed and Omitted
// counts the rest, so that the annotation stays far below the API
// server's 256 KiB limit on all of an object's annotations: a hold takes
// at most about 550 bytes, the annotation at most about 55 KiB.
const MaxPublishedHolds = 100

// PublishedHolds is the value of HoldsAnnotation.
type PublishedHolds struct {
	// Holds are the holds in force, by policy and version.
	Holds []Hold `json:"holds"`
	// Omitted counts the holds in force left out past MaxPublishedHolds.
	// +optional
	Omitted int `json:"omitted,omitempty"`
}

// EncodeHolds returns the HoldsAnnotation value of holds (the holds in
// force), "" when there are none.
func EncodeHolds(holds []Hold) string {
	if len(holds) == 0 {
		return ""
	}
	sorted := slices.Clone(holds)
	slices.SortFunc(sorted, func(a, b Hold) int {
		return cmp.Or(strings.Compare(a.Policy, b.Policy), strings.Compare(a.Version, b.Version), strings.Compare(a.RevertedIn, b.RevertedIn))
	})
	p := PublishedHolds{Holds: sorted}
	if len(sorted) > MaxPublishedHolds {
		p = PublishedHolds{Holds: sorted[:MaxPublishedHolds], Omitted: len(sorted) - MaxPublishedHolds}
	}
	data, _ := json.Marshal(p) // strings and an int: it cannot fail
	return string(data)
}

// DecodeHolds reads a HoldsAnnotation value; "" is no holds.
func DecodeHolds(value string) (PublishedHolds, error) {
	var p PublishedHolds
	if value == "" {
		return p, nil
	}
	if err := json.Unmarshal([]byte(value), &p); err != nil {
		return PublishedHolds{}, fmt.Errorf("reading annotation %s: %w", HoldsAnnotation, err)
	}
	return p, nil
}
