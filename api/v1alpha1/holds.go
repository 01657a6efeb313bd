package v1alpha1

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// HoldsAnnotation is where the manager publishes the holds and refused
// downgrades of a Flux ImageUpdateAutomation, whose status has no field
// for them: compact JSON of PublishedHolds, owned by the manager's field
// manager (uprev), written with a merge patch only when its value
// changes, and removed when neither is left. An UpdateAutomation reports
// them in status.holds and status.refusedDowngrades instead and never
// carries it.
const HoldsAnnotation = "status.uprev.dev/holds"

// MaxPublishedHolds bounds each list HoldsAnnotation carries (holds,
// refused downgrades): past it, the first MaxPublishedHolds of the list
// (sorted) are listed and its omitted count gives the rest, so that the
// annotation stays readable; MaxHoldsAnnotationBytes bounds its size.
const MaxPublishedHolds = 100

// MaxHoldsAnnotationBytes bounds the HoldsAnnotation value, far below the
// API server's 256 KiB limit on all of an object's annotations, whatever
// the length of the file paths and versions: past it, refused downgrades
// and then holds are left out from the end and counted as omitted.
const MaxHoldsAnnotationBytes = 64 << 10

// PublishedHolds is the value of HoldsAnnotation.
type PublishedHolds struct {
	// Holds are the holds in force, by policy and version.
	// +optional
	Holds []Hold `json:"holds,omitempty"`
	// Omitted counts the holds in force left out past MaxPublishedHolds.
	// +optional
	Omitted int `json:"omitted,omitempty"`
	// RefusedDowngrades are the changes the last run did not make because
	// Git holds a higher version, by policy and file. Values written
	// before they were published have none.
	// +optional
	RefusedDowngrades []RefusedDowngrade `json:"refusedDowngrades,omitempty"`
	// RefusedOmitted counts the refused downgrades left out past
	// MaxPublishedHolds.
	// +optional
	RefusedOmitted int `json:"refusedOmitted,omitempty"`
}

// EncodeHolds returns the HoldsAnnotation value of holds (the holds in
// force) and refused (the downgrades the last run refused), "" when there
// are neither.
func EncodeHolds(holds []Hold, refused ...RefusedDowngrade) string {
	if len(holds) == 0 && len(refused) == 0 {
		return ""
	}
	var p PublishedHolds
	p.Holds, p.Omitted = firstPublished(holds, func(a, b Hold) int {
		return cmp.Or(strings.Compare(a.Policy, b.Policy), strings.Compare(a.Version, b.Version), strings.Compare(a.RevertedIn, b.RevertedIn))
	})
	p.RefusedDowngrades, p.RefusedOmitted = firstPublished(refused, func(a, b RefusedDowngrade) int {
		return cmp.Or(strings.Compare(a.Policy, b.Policy), strings.Compare(a.File, b.File), strings.Compare(a.Current, b.Current), strings.Compare(a.Selected, b.Selected))
	})
	data, _ := json.Marshal(p) // strings and ints: it cannot fail
	for len(data) > MaxHoldsAnnotationBytes && len(p.RefusedDowngrades)+len(p.Holds) > 0 {
		if n := len(p.RefusedDowngrades); n > 0 {
			p.RefusedDowngrades, p.RefusedOmitted = p.RefusedDowngrades[:n-1], p.RefusedOmitted+1
		} else {
			p.Holds, p.Omitted = p.Holds[:len(p.Holds)-1], p.Omitted+1
		}
		data, _ = json.Marshal(p)
	}
	return string(data)
}

// firstPublished returns a sorted copy of items cut to MaxPublishedHolds,
// and how many were cut.
func firstPublished[T any](items []T, compare func(a, b T) int) ([]T, int) {
	sorted := slices.Clone(items)
	slices.SortFunc(sorted, compare)
	if len(sorted) > MaxPublishedHolds {
		return sorted[:MaxPublishedHolds], len(sorted) - MaxPublishedHolds
	}
	return sorted, 0
}

// DecodeHolds reads a HoldsAnnotation value; "" is no holds and no
// refused downgrades.
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
