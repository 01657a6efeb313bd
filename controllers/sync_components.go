package controllers

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/apply"
)

// appliedComponents returns the images of the objects an apply wrote or
// found unchanged (apply.AppliedComponents), for status.targets[].components.
func appliedComponents(objects []*unstructured.Unstructured, res apply.Result, defaultNamespace string) ([]uprevv1.AppliedComponent, int) {
	found, omitted := apply.AppliedComponents(objects, res, defaultNamespace, uprevv1.MaxTargetComponents)
	var components []uprevv1.AppliedComponent
	for _, c := range found {
		components = append(components, uprevv1.AppliedComponent(c))
	}
	return components, omitted
}

// componentLabels are the labels of uprev_target_component_info.
var componentLabels = []string{"sync", "namespace", "target", "image", "tag", "digest"}

// TargetComponentMetric is the gauge uprev_target_component_info: 1 for
// every image, tag and digest a Sync's target last applied, as in the
// targets' SyncTargets (status.components). It remembers the series of each Sync
// so that those a target no longer runs, and those of a deleted Sync, are
// deleted.
type TargetComponentMetric struct {
	vec       *prometheus.GaugeVec
	mu        sync.Mutex
	published map[types.NamespacedName][]prometheus.Labels
}

// NewTargetComponentMetric returns the metric, unregistered.
func NewTargetComponentMetric() *TargetComponentMetric {
	return &TargetComponentMetric{
		vec: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "uprev_target_component_info",
			Help: "A container image (repository, tag and digest) that a Sync target last applied; always 1.",
		}, componentLabels),
		published: map[types.NamespacedName][]prometheus.Labels{},
	}
}

// Describe implements prometheus.Collector.
func (m *TargetComponentMetric) Describe(ch chan<- *prometheus.Desc) { m.vec.Describe(ch) }

// Collect implements prometheus.Collector.
func (m *TargetComponentMetric) Collect(ch chan<- prometheus.Metric) { m.vec.Collect(ch) }

// Publish makes the series of a Sync match the components its targets
// recorded, given the status of each of its current targets. A nil metric
// does nothing.
func (m *TargetComponentMetric) Publish(s *uprevv1.Sync, targets []*uprevv1.TargetStatus) {
	if m == nil {
		return
	}
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	want := componentSeries(s, targets)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleteExcept(m.published[key], want)
	for _, l := range want {
		m.vec.With(l).Set(1)
	}
	m.published[key] = want
}

// Forget deletes every series of a Sync. A nil metric does nothing.
func (m *TargetComponentMetric) Forget(key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleteExcept(m.published[key], nil)
	delete(m.published, key)
}

// deleteExcept deletes the series of old that keep does not hold.
func (m *TargetComponentMetric) deleteExcept(old, keep []prometheus.Labels) {
	kept := make(map[string]bool, len(keep))
	for _, l := range keep {
		kept[labelValues(l)] = true
	}
	for _, l := range old {
		if !kept[labelValues(l)] {
			m.vec.Delete(l)
		}
	}
}

// labelValues returns the values of a series' labels, in componentLabels
// order, as a comparable key.
func labelValues(l prometheus.Labels) string {
	v := make([]string, len(componentLabels))
	for i, name := range componentLabels {
		v[i] = l[name]
	}
	return strings.Join(v, "\x00")
}

// componentSeries returns the labels of every series of a Sync: one per
// component of each of its targets.
func componentSeries(s *uprevv1.Sync, targets []*uprevv1.TargetStatus) []prometheus.Labels {
	var series []prometheus.Labels
	for _, ts := range targets {
		for _, c := range ts.Components {
			series = append(series, prometheus.Labels{
				"sync": s.Name, "namespace": s.Namespace, "target": ts.Name,
				"image": c.Image, "tag": c.Tag, "digest": c.Digest,
			})
		}
	}
	return series
}
