package v1alpha1

import "fmt"

// RolloutWaves returns the targets grouped in the order a Sync applies
// them: the waves of spec.rollout, then every target named in none as a
// last wave. A wave naming an unknown target, or a target named twice, is a
// configuration error. The Sync controller and the fleet view both read
// waves through it.
func (in *SyncSpec) RolloutWaves() ([][]Target, error) {
	byName := map[string]Target{}
	for _, t := range in.Targets {
		if _, dup := byName[t.Name]; dup {
			return nil, fmt.Errorf("spec.targets: %q is listed twice", t.Name)
		}
		byName[t.Name] = t
	}
	placed := map[string]bool{}
	var waves [][]Target
	if in.Rollout != nil {
		for i, names := range in.Rollout.Waves {
			var wave []Target
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
	var rest []Target
	for _, t := range in.Targets {
		if !placed[t.Name] {
			rest = append(rest, t)
		}
	}
	if len(rest) > 0 {
		waves = append(waves, rest)
	}
	return waves, nil
}
