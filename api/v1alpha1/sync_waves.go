package v1alpha1

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// RolloutWaves returns the named targets of the spec grouped in the order
// a Sync applies them (WavesOf). The targets its selectors select are not
// known to the spec alone; the controller passes them to WavesOf.
func (in *SyncSpec) RolloutWaves() ([][]Target, error) {
	var named []Target
	for _, t := range in.Targets {
		if !t.Selects() {
			named = append(named, t)
		}
	}
	return in.WavesOf(named, nil)
}

// WavesOf returns targets, a Sync's targets with its selectors resolved,
// grouped in the order the Sync applies them: the steps of spec.rollout
// (see Rollout.Steps; labels gives the labels of a selected target's
// Secret, nil for none), or its waves, then every target in none as a last
// wave. A target named twice,
// or placed in two waves, is a configuration error; so is a wave naming
// an unknown target, unless the spec selects targets by label, when that
// target is not selected now and is left out. The Sync controller and the
// fleet view both read waves through it.
func (in *SyncSpec) WavesOf(targets []Target, labels func(target string) map[string]string) ([][]Target, error) {
	byName := map[string]Target{}
	for _, t := range targets {
		if _, dup := byName[t.Name]; dup {
			return nil, fmt.Errorf("spec.targets: %q is listed twice", t.Name)
		}
		byName[t.Name] = t
	}
	selects := slices.ContainsFunc(in.Targets, Target.Selects)
	if in.Rollout != nil && len(in.Rollout.Steps) > 0 {
		return in.Rollout.steps(targets, labels), nil
	}
	placed := map[string]bool{}
	var waves [][]Target
	if in.Rollout != nil {
		for i, names := range in.Rollout.Waves {
			var wave []Target
			for _, name := range names {
				t, ok := byName[name]
				if !ok && selects {
					continue
				}
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
	var rest []Target
	for _, t := range targets {
		if !placed[t.Name] {
			rest = append(rest, t)
		}
	}
	if len(rest) > 0 {
		waves = append(waves, rest)
	}
	return waves, nil
}

// steps groups targets by the rollout's steps, then the rest as a last
// step. Steps that take no target are kept, empty, so that step i of the
// status is step i of the spec.
func (in *Rollout) steps(targets []Target, labels func(target string) map[string]string) [][]Target {
	placed := make([]bool, len(targets))
	taken := 0
	var waves [][]Target
	for _, step := range in.Steps {
		var wave []Target
		want := 0
		switch {
		case step.Count != nil:
			want = *step.Count
		case step.Percent != nil:
			want = (len(targets)**step.Percent + 99) / 100
		}
		for i, t := range targets {
			if placed[i] {
				continue
			}
			switch {
			case step.Selector != nil:
				if labels == nil || !matches(step.Selector.MatchLabels, labels(t.Name)) {
					continue
				}
			case taken >= want:
				continue
			}
			placed[i] = true
			taken++
			wave = append(wave, t)
		}
		waves = append(waves, wave)
	}
	var rest []Target
	for i, t := range targets {
		if !placed[i] {
			rest = append(rest, t)
		}
	}
	if len(rest) > 0 {
		waves = append(waves, rest)
	}
	return waves
}

// matches says whether have holds every label of want.
func matches(want, have map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// PauseAfter is the wait after wave i (counted from 0) is done before the
// next starts: its step's pause, or the pause between waves.
func (in *Rollout) PauseAfter(i int) time.Duration {
	if in == nil {
		return 0
	}
	if len(in.Steps) > 0 {
		if i < len(in.Steps) {
			return in.Steps[i].Pause.Duration
		}
		return 0
	}
	return in.PauseBetweenWaves.Duration
}

// FailuresAllowed is how many of total targets may fail a revision
// before the rollout stops (MaxFailures, a percent rounded down).
func (in *Rollout) FailuresAllowed(total int) (int, error) {
	if in == nil || in.MaxFailures == nil {
		return 0, nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(in.MaxFailures, total, false)
	if err != nil {
		return 0, fmt.Errorf("spec.rollout.maxFailures: %w", err)
	}
	return n, nil
}
