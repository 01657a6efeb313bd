package v1alpha1

import (
	"fmt"
	"slices"
)

// RolloutWaves returns the named targets of the spec grouped in the order
// a Sync applies them (WavesOf). The targets its selectors select are not
// known to the spec alone; the controller passes them to WavesOf.
func (in *SyncSpec) RolloutWaves() ([][]Target, error) {
	var named []Target
	for _, t := range in.Targets {
		if t.Selector == nil {
			named = append(named, t)
		}
	}
	return in.WavesOf(named)
}

// WavesOf returns targets, a Sync's targets with its selectors resolved,
// grouped in the order the Sync applies them: the waves of spec.rollout,
// then every target named in none as a last wave. A target named twice,
// or placed in two waves, is a configuration error; so is a wave naming
// an unknown target, unless the spec selects targets by label, when that
// target is not selected now and is left out. The Sync controller and the
// fleet view both read waves through it.
func (in *SyncSpec) WavesOf(targets []Target) ([][]Target, error) {
	byName := map[string]Target{}
	for _, t := range targets {
		if _, dup := byName[t.Name]; dup {
			return nil, fmt.Errorf("spec.targets: %q is listed twice", t.Name)
		}
		byName[t.Name] = t
	}
	selects := slices.ContainsFunc(in.Targets, func(t Target) bool { return t.Selector != nil })
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
