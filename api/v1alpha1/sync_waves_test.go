package v1alpha1

import (
	"testing"

	. "github.com/onsi/gomega"
)

// waveNames lists the target names of each wave.
func waveNames(waves [][]Target) [][]string {
	var out [][]string
	for _, w := range waves {
		var names []string
		for _, t := range w {
			names = append(names, t.Name)
		}
		out = append(out, names)
	}
	return out
}

func TestRolloutWaves(t *testing.T) {
	targets := []Target{{Name: "local"}, {Name: "eu-1"}, {Name: "us-1"}, {Name: "ap-1"}}
	for _, tc := range []struct {
		name    string
		waves   [][]string
		want    [][]string
		wantErr string
	}{
		{name: "no rollout: one wave", want: [][]string{{"local", "eu-1", "us-1", "ap-1"}}},
		{name: "waves then the rest", waves: [][]string{{"local"}, {"eu-1", "us-1"}},
			want: [][]string{{"local"}, {"eu-1", "us-1"}, {"ap-1"}}},
		{name: "all placed", waves: [][]string{{"ap-1", "local"}, {"eu-1", "us-1"}},
			want: [][]string{{"ap-1", "local"}, {"eu-1", "us-1"}}},
		{name: "unknown target", waves: [][]string{{"mars-1"}}, wantErr: `no target named "mars-1"`},
		{name: "target twice", waves: [][]string{{"local"}, {"local"}}, wantErr: `"local" is already in an earlier wave`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := SyncSpec{Targets: targets}
			if tc.waves != nil {
				spec.Rollout = &Rollout{Waves: tc.waves}
			}
			waves, err := spec.RolloutWaves()
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(waveNames(waves)).To(Equal(tc.want))
		})
	}
}
