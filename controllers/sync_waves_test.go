package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

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
			wait, ready := waveGate(earlier, (&uprevv1.SyncStatus{Targets: tc.statuses}).Target, "main@sha1:2", !tc.uncheckedHealth, false, tc.pause, now)
			g.Expect(ready).To(Equal(tc.wantReady))
			g.Expect(wait).To(Equal(tc.wantWait))
		})
	}
}

func TestHealthySince(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	before := metav1.NewTime(now.Add(-time.Hour))
	for _, tc := range []struct {
		name     string
		since    *metav1.Time
		previous string
		healthy  bool
		want     *metav1.Time
	}{
		{name: "becomes healthy", previous: "main@sha1:1", healthy: true, want: &metav1.Time{Time: now}},
		{name: "stays healthy on the same revision", since: &before, previous: "main@sha1:2", healthy: true, want: &before},
		{name: "healthy on a new revision counts anew", since: &before, previous: "main@sha1:1", healthy: true, want: &metav1.Time{Time: now}},
		{name: "a failed check clears it", since: &before, previous: "main@sha1:2"},
		{name: "unhealthy on a new revision", since: &before, previous: "main@sha1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := healthySince(tc.since, tc.previous, "main@sha1:2", tc.healthy, now)
			if tc.want == nil {
				NewWithT(t).Expect(got).To(BeNil())
				return
			}
			NewWithT(t).Expect(got.Time).To(BeTemporally("==", tc.want.Time))
		})
	}
}
