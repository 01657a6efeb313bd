package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// waveNames lists the target names of each wave.
func waveNames(waves [][]uprevv1.Target) [][]string {
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
	targets := []uprevv1.Target{{Name: "local"}, {Name: "eu-1"}, {Name: "us-1"}, {Name: "ap-1"}}
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
			spec := uprevv1.SyncSpec{Targets: targets}
			if tc.waves != nil {
				spec.Rollout = &uprevv1.Rollout{Waves: tc.waves}
			}
			waves, err := rolloutWaves(spec)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(waveNames(waves)).To(Equal(tc.want))
		})
	}
}

func TestWaveGate(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-ago)); return &t }
	earlier := []uprevv1.Target{{Name: "a"}, {Name: "b"}}
	for _, tc := range []struct {
		name      string
		statuses  []uprevv1.TargetStatus
		pause     time.Duration
		wantReady bool
		wantWait  time.Duration
		// uncheckedHealth is a Sync with wait: false.
		uncheckedHealth bool
	}{
		{name: "earlier wave healthy on the revision", wantReady: true, statuses: []uprevv1.TargetStatus{
			{Name: "a", LastAppliedRevision: "main@sha1:2", Healthy: true, LastAppliedTime: at(time.Minute)},
			{Name: "b", LastAppliedRevision: "main@sha1:2", Healthy: true, LastAppliedTime: at(time.Minute)}}},
		{name: "one target still on the old revision", statuses: []uprevv1.TargetStatus{
			{Name: "a", LastAppliedRevision: "main@sha1:2", Healthy: true, LastAppliedTime: at(time.Minute)},
			{Name: "b", LastAppliedRevision: "main@sha1:1", Healthy: true, LastAppliedTime: at(time.Minute)}}},
		{name: "one target unhealthy", statuses: []uprevv1.TargetStatus{
			{Name: "a", LastAppliedRevision: "main@sha1:2", Healthy: true, LastAppliedTime: at(time.Minute)},
			{Name: "b", LastAppliedRevision: "main@sha1:2", Healthy: false, LastAppliedTime: at(time.Minute)}}},
		{name: "health not checked", statuses: []uprevv1.TargetStatus{
			{Name: "a", LastAppliedRevision: "main@sha1:2", Healthy: true, LastAppliedTime: at(time.Minute)},
			{Name: "b", LastAppliedRevision: "main@sha1:2", Healthy: false, LastAppliedTime: at(time.Minute)}},
			wantReady: true, uncheckedHealth: true},
		{name: "one target never applied", statuses: []uprevv1.TargetStatus{
			{Name: "a", LastAppliedRevision: "main@sha1:2", Healthy: true, LastAppliedTime: at(time.Minute)}}},
		{name: "pause not over", pause: 2 * time.Minute, wantReady: true, wantWait: 90 * time.Second, statuses: []uprevv1.TargetStatus{
			{Name: "a", LastAppliedRevision: "main@sha1:2", Healthy: true, LastAppliedTime: at(5 * time.Minute)},
			{Name: "b", LastAppliedRevision: "main@sha1:2", Healthy: true, LastAppliedTime: at(30 * time.Second)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			wait, ready := waveGate(earlier, tc.statuses, "main@sha1:2", !tc.uncheckedHealth, tc.pause, now)
			g.Expect(ready).To(Equal(tc.wantReady))
			g.Expect(wait).To(Equal(tc.wantWait))
		})
	}
}
