package v1alpha1

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
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

func TestRolloutSteps(t *testing.T) {
	g := NewWithT(t)
	var targets []Target
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		targets = append(targets, Target{Name: name})
	}
	labels := func(target string) map[string]string {
		if target == "e" {
			return map[string]string{"canary": "true"}
		}
		return nil
	}
	one, ten, half, all := 1, 10, 50, 100
	spec := SyncSpec{Targets: []Target{{Selector: &TargetSelector{MatchLabels: map[string]string{"fleet": "prod"}}}},
		Rollout: &Rollout{Steps: []RolloutStep{
			{Selector: &TargetSelector{MatchLabels: map[string]string{"canary": "true"}}},
			{Count: &one}, {Percent: &ten}, {Percent: &half}, {Percent: &all},
		}}}
	waves, err := spec.WavesOf(targets, labels)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waveNames(waves)).To(Equal([][]string{
		{"e"},                     // the canary selector
		nil,                       // count 1: the canary already makes one
		nil,                       // 10% of 10: one, already there
		{"a", "b", "c", "d"},      // up to 50%
		{"f", "g", "h", "i", "j"}, // the rest
	}))
	g.Expect(spec.Rollout.PauseAfter(0)).To(BeZero())
	n, err := (&Rollout{MaxFailures: ptr.To(intstr.FromString("15%"))}).FailuresAllowed(20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(3))
}
