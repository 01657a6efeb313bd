package fleet

import (
	"cmp"
	"slices"
	"strings"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/apply"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/update"
)

// Inputs are the objects a fleet table is built from.
type Inputs struct {
	// Policies are the ImagePolicies; each one a Sync deploys is a row.
	Policies []imagev1.ImagePolicy
	// Repositories give the image of a policy that has no latest ref yet.
	Repositories []imagev1.ImageRepository
	// Automations give the holds in force.
	Automations []uprevv1.UpdateAutomation
	// Syncs give the columns, one per target, and what each target runs.
	Syncs []uprevv1.Sync
	// Gates give the versions that wait at a ReleaseGate.
	Gates []uprevv1.ReleaseGate
	// Now is the time waiting versions' remaining waits are measured from.
	Now time.Time
}

// State says how the version a target runs compares with the version Git
// wants.
type State string

const (
	// NotDeployed means the target's Sync does not deploy the component.
	NotDeployed State = ""
	// UpToDate means the target runs the policy's latest version.
	UpToDate State = "up-to-date"
	// Behind means the target runs an older version, or none, and is not
	// waiting for an earlier wave: Git has not been written yet, or the
	// target has not tried the Sync's latest revision yet.
	Behind State = "behind"
	// Waiting means the target runs an older version and its wave has not
	// started on the Sync's latest revision, because an earlier wave is not
	// done or the pause between waves is not over.
	Waiting State = "waiting"
	// Held means a revert holds the policy's latest version, so Git keeps
	// an earlier one until a newer version appears or the hold is released;
	// the target runs a version other than the held one. A target still
	// running the held version is Behind (or Waiting): the revert has yet
	// to reach it.
	Held State = "held"
	// Unknown means the policy has selected no version yet.
	Unknown State = "unknown"
	// Ahead means the target runs a version the policy ranks above its
	// latest one: Git holds a higher version and the automation refuses to
	// downgrade it.
	Ahead State = "ahead"
	// Failed means the target runs an older version, or none, because its
	// last attempt at its Sync's latest revision failed: the target's
	// status message says why.
	Failed State = "failed"
)

// severity orders states so that a cell running several versions shows the
// one that needs attention most.
var severity = map[State]int{NotDeployed: 0, Unknown: 1, UpToDate: 2, Ahead: 3, Held: 4, Waiting: 5, Behind: 6, Failed: 7}

// Version is an image tag and the digest it is pinned to, if any.
type Version struct {
	// Tag is the image tag.
	Tag string `json:"tag"`
	// Digest is the pinned digest (sha256:...), when known.
	Digest string `json:"digest,omitempty"`
}

// Table is the fleet view: components by cluster.
type Table struct {
	// Columns are the Sync targets, by Sync then in rollout order.
	Columns []Column `json:"columns"`
	// Rows are the components, by policy namespace and name.
	Rows []Row `json:"rows"`
	// now is Inputs.Now, for the remaining waits of waiting versions.
	now time.Time
}

// Column is one target of one Sync.
type Column struct {
	// Name is the column header: the target's name, prefixed with its
	// Sync's name (and namespace) where target names alone would repeat.
	Name string `json:"name"`
	// Sync is the Sync as namespace/name.
	Sync string `json:"sync"`
	// Target is the target's name.
	Target string `json:"target"`
	// Wave is the target's rollout wave, counted from 1.
	Wave int `json:"wave"`
}

// Row is one component: an ImagePolicy whose image a Sync deploys.
type Row struct {
	// Namespace is the ImagePolicy's namespace.
	Namespace string `json:"namespace"`
	// Component is the ImagePolicy's name.
	Component string `json:"component"`
	// Image is the policy's image repository.
	Image string `json:"image"`
	// Latest is the policy's latest ref, the version Git wants unless it is
	// held; nil when the policy has selected none yet.
	Latest *Version `json:"latest,omitempty"`
	// Hold is the hold on Latest, when a revert holds it.
	Hold *uprevv1.Hold `json:"hold,omitempty"`
	// Waiting is the newest version that waits at a ReleaseGate, of the
	// first gate (by name) that holds one back.
	Waiting *uprevv1.WaitingVersion `json:"waiting,omitempty"`
	// Cells are the component on each column, in the order of Columns.
	Cells []Cell `json:"cells"`
}

// Cell is what one target runs of one component.
type Cell struct {
	// Running are the versions of the component the target runs, sorted.
	Running []Version `json:"running,omitempty"`
	// State compares them with the version Git wants.
	State State `json:"state,omitempty"`
}

// Build makes the fleet table of in: a row for every policy whose image a
// Sync's target runs, a column for every Sync target. Syncs whose waves
// are invalid are shown with every target in one wave.
func Build(in Inputs) Table {
	cols := columnsOf(in.Syncs)
	t := Table{Columns: make([]Column, len(cols)), Rows: []Row{}, now: in.Now}
	for i, c := range cols {
		t.Columns[i] = c.Column
	}
	holds := holdsByPolicy(in.Automations)
	for _, p := range sortedPolicies(in.Policies) {
		if row, ok := buildRow(p, imageOf(p, in.Repositories), holds, cols); ok {
			row.Waiting = waitingOf(in.Gates, p.Namespace, p.Name)
			t.Rows = append(t.Rows, row)
		}
	}
	return t
}

// waitingOf returns the newest version of policy namespace/name that
// waits at a ReleaseGate, of the first gate by name that holds one back;
// nil when none waits.
func waitingOf(gates []uprevv1.ReleaseGate, namespace, name string) *uprevv1.WaitingVersion {
	sorted := slices.Clone(gates)
	slices.SortFunc(sorted, func(a, b uprevv1.ReleaseGate) int { return strings.Compare(a.Name, b.Name) })
	for _, g := range sorted {
		if g.Namespace != namespace {
			continue
		}
		for _, p := range g.Status.Policies {
			if p.Name == name && len(p.Waiting) > 0 {
				return &p.Waiting[0]
			}
		}
	}
	return nil
}

// holdsByPolicy returns the holds the automations report, by policy
// (namespace/name).
func holdsByPolicy(automations []uprevv1.UpdateAutomation) map[string][]uprevv1.Hold {
	holds := map[string][]uprevv1.Hold{}
	for _, a := range automations {
		for _, h := range a.Status.Holds {
			holds[h.Policy] = append(holds[h.Policy], h)
		}
	}
	return holds
}

// sortedPolicies returns policies by namespace and name.
func sortedPolicies(policies []imagev1.ImagePolicy) []imagev1.ImagePolicy {
	sorted := slices.Clone(policies)
	slices.SortFunc(sorted, func(a, b imagev1.ImagePolicy) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return sorted
}

// imageOf returns the image of a policy: that of its latest ref, or of its
// ImageRepository when it has none yet.
func imageOf(p imagev1.ImagePolicy, repos []imagev1.ImageRepository) string {
	if p.Status.LatestRef != nil {
		return p.Status.LatestRef.Name
	}
	ref := p.Spec.ImageRepositoryRef
	ns := cmp.Or(ref.Namespace, p.Namespace)
	for _, r := range repos {
		if r.Namespace == ns && r.Name == ref.Name {
			return r.Spec.Image
		}
	}
	return ""
}

// buildRow returns the row of policy p, whose image is image, and whether
// any column runs it.
func buildRow(p imagev1.ImagePolicy, image string, holds map[string][]uprevv1.Hold, cols []column) (Row, bool) {
	key := p.Namespace + "/" + p.Name
	row := Row{Namespace: p.Namespace, Component: p.Name, Image: image, Cells: make([]Cell, len(cols))}
	if ref := p.Status.LatestRef; ref != nil {
		row.Latest = &Version{Tag: ref.Tag, Digest: ref.Digest}
		row.Hold = holdOn(holds[key], update.Ref{Image: ref.Name, Tag: ref.Tag, Digest: ref.Digest})
	}
	canonical, err := registry.CanonicalName(image)
	if err != nil {
		return row, false
	}
	running, deployedBy := runningOn(cols, canonical)
	if len(deployedBy) == 0 {
		return row, false
	}
	for i, c := range cols {
		if deployedBy[c.sync] {
			row.Cells[i] = cellOf(running[i], c, row, p.Spec)
		}
	}
	return row, true
}

// runningOn returns the versions each column runs of the image whose
// canonical name is canonical, and the Syncs (by index) that deploy it:
// those with a target running it. A Sync applies the same revision to all
// its targets, so every one of them should run it.
func runningOn(cols []column, canonical string) (running [][]Version, deployedBy map[int]bool) {
	running = make([][]Version, len(cols))
	deployedBy = map[int]bool{}
	for i, c := range cols {
		running[i] = versionsOf(c.status, canonical)
		if len(running[i]) > 0 {
			deployedBy[c.sync] = true
		}
	}
	return running, deployedBy
}

// holdOn returns the hold, among holds, on ref, or nil.
func holdOn(holds []uprevv1.Hold, ref update.Ref) *uprevv1.Hold {
	for _, h := range holds {
		if (guard.Hold{Policy: h.Policy, Version: h.Version, RevertedIn: h.RevertedIn, Reason: h.Reason}).On(ref) {
			return &h
		}
	}
	return nil
}

// versionsOf returns the versions that a target runs of the image whose
// canonical name is canonical, sorted as the target's components are:
// apply.RunningOf's answer, so a component pinned by digest alone is
// shown (with no tag), as the promotion gate reads it too.
func versionsOf(ts *uprevv1.TargetStatus, canonical string) []Version {
	if ts == nil {
		return nil
	}
	cs := make([]apply.Component, len(ts.Components))
	for i, c := range ts.Components {
		cs[i] = apply.Component{Image: c.Image, Tag: c.Tag, Digest: c.Digest}
	}
	var versions []Version
	for _, c := range apply.RunningOf(cs, canonical) {
		versions = append(versions, Version{Tag: c.Tag, Digest: c.Digest})
	}
	return versions
}
