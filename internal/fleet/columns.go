package fleet

import (
	"cmp"
	"slices"
	"strings"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// column is a Column with what its cells are computed from.
type column struct {
	Column
	// sync is the index of the column's Sync among the Syncs built.
	sync int
	// status is the target's status; nil when it has none yet.
	status *uprevv1.TargetStatus
	// waiting says the target's wave has not started on the Sync's latest
	// revision.
	waiting bool
	// failed says the target's last attempt at the Sync's latest revision
	// failed.
	failed bool
}

// columnsOf returns the columns of syncs: by namespace and name, each
// Sync's targets in rollout order.
func columnsOf(syncs []uprevv1.Sync) []column {
	sorted := slices.Clone(syncs)
	slices.SortFunc(sorted, func(a, b uprevv1.Sync) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	var cols []column
	for i := range sorted {
		cols = append(cols, syncColumns(&sorted[i], i)...)
	}
	nameColumns(cols)
	return cols
}

// syncColumns returns the columns of one Sync's targets in rollout order.
func syncColumns(s *uprevv1.Sync, index int) []column {
	targets := targetsOf(s)
	waves, err := s.Spec.WavesOf(targets, nil)
	if err != nil {
		waves = [][]uprevv1.Target{targets}
	}
	var cols []column
	for w, wave := range waves {
		for _, target := range wave {
			c := column{
				Column: Column{Sync: s.Namespace + "/" + s.Name, Target: target.Name, Wave: w + 1},
				sync:   index,
				status: s.Status.Target(target.Name),
			}
			c.waiting = w > 0 && isWaiting(s, c.status)
			c.failed = isFailed(s, c.status)
			cols = append(cols, c)
		}
	}
	return cols
}

// targetsOf returns the targets of a Sync: those its spec names, then,
// when it selects targets by label, those with a status that it does not
// name, by name: the ones its selectors selected.
func targetsOf(s *uprevv1.Sync) []uprevv1.Target {
	var targets []uprevv1.Target
	named := map[string]bool{}
	selects := false
	for _, t := range s.Spec.Targets {
		if t.Selects() {
			selects = true
			continue
		}
		targets = append(targets, t)
		named[t.Name] = true
	}
	if !selects {
		return targets
	}
	var selected []uprevv1.Target
	for _, ts := range s.Status.Targets {
		if !named[ts.Name] {
			selected = append(selected, uprevv1.Target{Name: ts.Name})
		}
	}
	slices.SortFunc(selected, func(a, b uprevv1.Target) int { return strings.Compare(a.Name, b.Name) })
	return append(targets, selected...)
}

// isWaiting says whether a target of a later wave has not yet been tried on
// the revision its Sync last fetched.
func isWaiting(s *uprevv1.Sync, ts *uprevv1.TargetStatus) bool {
	latest := s.Status.LastAttemptedRevision
	return latest != "" && (ts == nil || ts.LastAttemptedRevision != latest)
}

// isFailed says whether a target's last attempt at the revision its Sync
// last fetched failed: tried, but not applied whole (and healthy, when the
// Sync waits).
func isFailed(s *uprevv1.Sync, ts *uprevv1.TargetStatus) bool {
	latest := s.Status.LastAttemptedRevision
	return latest != "" && ts != nil && ts.LastAttemptedRevision == latest && ts.LastAppliedRevision != latest
}

// nameColumns names each column by its target, or by Sync and target, or
// by namespace, Sync and target, whichever is the shortest that no other
// column shares.
func nameColumns(cols []column) {
	names := []func(c Column) string{
		func(c Column) string { return c.Target },
		func(c Column) string { _, sync, _ := strings.Cut(c.Sync, "/"); return sync + "/" + c.Target },
		func(c Column) string { return c.Sync + "/" + c.Target },
	}
	for _, nameOf := range names {
		count := map[string]int{}
		for _, c := range cols {
			count[nameOf(c.Column)]++
		}
		for i := range cols {
			if cols[i].Name == "" && count[nameOf(cols[i].Column)] == 1 {
				cols[i].Name = nameOf(cols[i].Column)
			}
		}
	}
}
