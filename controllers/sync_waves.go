package controllers

import (
	"fmt"
	"slices"
	"time"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// rolloutWaves returns the targets of a Sync grouped in the order they are
// applied: the waves of spec.rollout, then every target named in none as a
// last wave. A wave naming an unknown target, or a target named twice, is a
// configuration error.
func rolloutWaves(spec uprevv1.SyncSpec) ([][]uprevv1.Target, error) {
	byName := map[string]uprevv1.Target{}
	for _, t := range spec.Targets {
		if _, dup := byName[t.Name]; dup {
			return nil, fmt.Errorf("spec.targets: %q is listed twice", t.Name)
		}
		byName[t.Name] = t
	}
	placed := map[string]bool{}
	var waves [][]uprevv1.Target
	if spec.Rollout != nil {
		for i, names := range spec.Rollout.Waves {
			var wave []uprevv1.Target
			for _, name := range names {
				t, ok := byName[name]
				if !ok {
					return nil, fmt.Errorf("spec.rollout.waves[%d]: no target named %q", i, name)
				}
				if placed[name] {
					return nil, fmt.Errorf("spec.rollout.waves[%d]: target %q is already in an earlier wave", i, name)
				}
				placed[name] = true
				wave = append(wave, t)
			}
			if len(wave) > 0 {
				waves = append(waves, wave)
			}
		}
	}
	var rest []uprevv1.Target
	for _, t := range spec.Targets {
		if !placed[t.Name] {
			rest = append(rest, t)
		}
	}
	if len(rest) > 0 {
		waves = append(waves, rest)
	}
	return waves, nil
}

// waveGate says whether a wave may start on revision: every target of the
// earlier waves applied it (and is healthy, when health is checked), and the pause since the last of
// them finished has passed. It returns how long to wait for the pause, and
// whether the earlier waves are done at all.
func waveGate(earlier []uprevv1.Target, statuses []uprevv1.TargetStatus, revision string, checkHealth bool, pause time.Duration, now time.Time) (wait time.Duration, ready bool) {
	var last time.Time
	for _, t := range earlier {
		i := slices.IndexFunc(statuses, func(s uprevv1.TargetStatus) bool { return s.Name == t.Name })
		if i < 0 {
			return 0, false
		}
		s := statuses[i]
		if s.LastAppliedRevision != revision || (checkHealth && !s.Healthy) || s.LastAppliedTime == nil {
			return 0, false
		}
		if s.LastAppliedTime.After(last) {
			last = s.LastAppliedTime.Time
		}
	}
	return max(0, last.Add(pause).Sub(now)), true
}
