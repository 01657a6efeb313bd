package fleet

import (
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"

	"github.com/uprev-dev/uprev/internal/policy"
)

// cellOf returns the cell of column c, which runs versions of a row's
// component. A target running several versions shows the state that needs
// attention most; one running none that its Sync deploys is behind,
// waiting or failed. A behind target whose last attempt failed is failed.
func cellOf(versions []Version, c column, row Row, spec imagev1.ImagePolicySpec) Cell {
	if len(versions) == 0 {
		return Cell{State: failedIf(missingState(c.waiting, row), c.failed)}
	}
	cell := Cell{Running: versions}
	for _, v := range versions {
		if s := failedIf(stateOf(v, c.waiting, row, spec), c.failed); severity[s] > severity[cell.State] {
			cell.State = s
		}
	}
	return cell
}

// failedIf returns Failed for a Behind state when the target's last
// attempt failed, and s otherwise.
func failedIf(s State, failed bool) State {
	if s == Behind && failed {
		return Failed
	}
	return s
}

// missingState is the state of a target that runs none of a component its
// Sync deploys.
func missingState(waiting bool, row Row) State {
	switch {
	case waiting:
		return Waiting
	case row.Latest == nil:
		return Unknown
	default:
		return Behind
	}
}

// stateOf compares one running version with the row's latest. While the
// latest is held, Git wants an earlier version: a target still running the
// held one has yet to get the revert.
func stateOf(v Version, waiting bool, row Row, spec imagev1.ImagePolicySpec) State {
	latest := row.Latest != nil && sameVersion(v, *row.Latest)
	switch {
	case row.Latest == nil:
		return Unknown
	case row.Hold != nil && !latest:
		return Held
	case row.Hold == nil && latest:
		return UpToDate
	case row.Hold == nil && ranksAbove(spec, v.Tag, row.Latest.Tag):
		return Ahead
	case waiting:
		return Waiting
	default:
		return Behind
	}
}

// sameVersion says whether a and b are the same tag, and the same digest
// where both name one.
func sameVersion(a, b Version) bool {
	return a.Tag == b.Tag && (a.Digest == "" || b.Digest == "" || a.Digest == b.Digest)
}

// ranksAbove says whether the policy orders tag a above tag b; tags it
// cannot order are not.
func ranksAbove(spec imagev1.ImagePolicySpec, a, b string) bool {
	order, err := policy.Compare(spec.Policy, spec.FilterTags, a, b)
	return err == nil && order > 0
}
