package fleet

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/registry"
)

// Rollout is where one Sync's rollout stands: its waves in order and what
// each target last did.
type Rollout struct {
	// Namespace and Name are the Sync's.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Revision is the revision the Sync last fetched, which every wave
	// gets in turn.
	Revision string `json:"revision,omitempty"`
	// Waves are the targets in rollout order.
	Waves []Wave `json:"waves"`
	// WaitingWave is the number (from 1) of the first wave that has not
	// started on Revision; 0 when none waits.
	WaitingWave int `json:"waitingWave,omitempty"`
	// Status is the Sync's Ready condition message: what the rollout
	// waits for ("rollout of ...: 1 of 2 waves done, next wave in 8s"), or
	// what failed.
	Status string `json:"status,omitempty"`
	// Ready is the Sync's Ready condition status: True, False or Unknown
	// ("" when it has none yet).
	Ready string `json:"ready,omitempty"`
	// Suspended says the Sync is suspended.
	Suspended bool `json:"suspended,omitempty"`
	// HealthChecked says the Sync health-checks what it applies
	// (spec.wait); without, a target's Healthy says nothing.
	HealthChecked bool `json:"healthChecked,omitempty"`
}

// Wave is one rollout wave.
type Wave struct {
	// Number counts waves from 1.
	Number int `json:"number"`
	// Targets are the wave's targets.
	Targets []TargetState `json:"targets"`
}

// TargetState is what one Sync target last did.
type TargetState struct {
	// Name is the target's name.
	Name string `json:"name"`
	// AppliedRevision is the last revision applied whole (and healthy,
	// when the Sync waits).
	AppliedRevision string `json:"appliedRevision,omitempty"`
	// AttemptedRevision is the last revision tried.
	AttemptedRevision string `json:"attemptedRevision,omitempty"`
	// Since is when AppliedRevision reached the target.
	Since *time.Time `json:"since,omitempty"`
	// Healthy says the applied objects passed their health checks.
	Healthy bool `json:"healthy"`
	// Message says what the target's last attempt did or why it failed.
	Message string `json:"message,omitempty"`
	// Components are the images of AppliedRevision.
	Components []Component `json:"components,omitempty"`
	// Waiting says the target's wave has not started on the Sync's
	// revision.
	Waiting bool `json:"waiting,omitempty"`
	// Failed says the target's last attempt at the Sync's revision failed.
	Failed bool `json:"failed,omitempty"`
}

// Component is one image a target runs.
type Component struct {
	// Image is the image repository, canonical (registry and path).
	Image string `json:"image"`
	Version
}

// Rollouts returns the rollout of every Sync, by namespace and name. Like
// Build, it shows a Sync whose waves are invalid with every target in one
// wave.
func Rollouts(syncs []uprevv1.Sync) []Rollout {
	sorted := slices.Clone(syncs)
	slices.SortFunc(sorted, func(a, b uprevv1.Sync) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	rollouts := make([]Rollout, 0, len(sorted))
	for i := range sorted {
		s := &sorted[i]
		r := Rollout{Namespace: s.Namespace, Name: s.Name, Revision: s.Status.LastAttemptedRevision, Suspended: s.Spec.Suspend, HealthChecked: s.Spec.Wait}
		if c := apimeta.FindStatusCondition(s.Status.Conditions, meta.ReadyCondition); c != nil {
			r.Ready, r.Status = string(c.Status), c.Message
		}
		for _, c := range syncColumns(s, i) {
			if len(r.Waves) < c.Wave {
				r.Waves = append(r.Waves, Wave{Number: c.Wave})
			}
			if c.waiting && r.WaitingWave == 0 {
				r.WaitingWave = c.Wave
			}
			wave := &r.Waves[c.Wave-1]
			wave.Targets = append(wave.Targets, targetState(c))
		}
		rollouts = append(rollouts, r)
	}
	return rollouts
}

// targetState returns what column c's target last did.
func targetState(c column) TargetState {
	st := TargetState{Name: c.Target, Waiting: c.waiting, Failed: c.failed}
	ts := c.status
	if ts == nil {
		return st
	}
	st.AppliedRevision, st.AttemptedRevision = ts.LastAppliedRevision, ts.LastAttemptedRevision
	st.Healthy, st.Message = ts.Healthy, ts.Message
	if ts.LastAppliedTime != nil {
		since := ts.LastAppliedTime.Time
		st.Since = &since
	}
	for _, comp := range ts.Components {
		image := comp.Image
		if canonical, err := registry.CanonicalName(comp.Image); err == nil {
			image = canonical
		}
		st.Components = append(st.Components, Component{Image: image, Version: Version{Tag: comp.Tag, Digest: comp.Digest}})
	}
	return st
}
