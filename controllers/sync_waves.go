package controllers

import (
	"time"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// waveGate says whether a wave may start on revision: every target of the
// earlier waves applied it (and is healthy, when health is checked), and
// the pause since the last of them finished has passed; status looks up a
// target's status by name (nil when it has none). With skipFailed, a
// target that tried the revision and failed does not hold the wave back
// (the rollout tolerates failures). It returns how long to wait for the pause, and
// whether the earlier waves are done at all.
func waveGate(earlier []uprevv1.Target, status func(target string) *uprevv1.TargetStatus, revision string, checkHealth, skipFailed bool, pause time.Duration, now time.Time) (wait time.Duration, ready bool) {
	var last time.Time
	for _, t := range earlier {
		s := status(t.Name)
		if s == nil {
			return 0, false
		}
		if skipFailed && s.LastAttemptedRevision == revision && s.LastAppliedRevision != revision {
			continue
		}
		if s.LastAppliedRevision != revision || (checkHealth && !s.Healthy) || s.LastAppliedTime == nil {
			return 0, false
		}
		if s.LastAppliedTime.After(last) {
			last = s.LastAppliedTime.Time
		}
	}
	return max(0, last.Add(pause).Sub(now)), true
}

// failedOn counts the targets of waves that tried revision and did not
// apply it.
func failedOn(waves [][]uprevv1.Target, revision string, status func(target string) *uprevv1.TargetStatus) int {
	n := 0
	for _, wave := range waves {
		for _, t := range wave {
			if ts := status(t.Name); ts != nil && ts.LastAttemptedRevision == revision && ts.LastAppliedRevision != revision {
				n++
			}
		}
	}
	return n
}

// stepCounts counts the targets of each step (wave) by where they are with
// revision, the one the Sync last fetched; status looks up a target's
// status by name. A step's revision becomes revision once any of its
// targets tried it, and stays what before said until then.
func stepCounts(waves [][]uprevv1.Target, before []uprevv1.StepStatus, revision string, status func(target string) *uprevv1.TargetStatus) []uprevv1.StepStatus {
	steps := make([]uprevv1.StepStatus, len(waves))
	for i, wave := range waves {
		step := &steps[i]
		if i < len(before) {
			step.Revision = before[i].Revision
		}
		step.Targets = len(wave)
		for _, t := range wave {
			ts := status(t.Name)
			switch {
			case ts == nil || ts.LastAttemptedRevision != revision:
				step.Waiting++
			case ts.LastAppliedRevision == revision:
				step.OnRevision++
				if ts.Healthy {
					step.Healthy++
				}
			default:
				step.Failed++
			}
			if ts != nil && ts.LastAttemptedRevision == revision {
				step.Revision = revision
			}
		}
	}
	return steps
}
