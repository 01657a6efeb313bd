package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// gotkSeries returns the samples of the metric family name whose kind,
// namespace and name labels are those given, each by its label values.
func gotkSeries(g Gomega, family, kind, ns, name string) []*dto.Metric {
	families, err := crmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var found []*dto.Metric
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["namespace"] == ns && labels["name"] == name {
				found = append(found, m)
			}
		}
	}
	return found
}

// conditionValue returns the value of gotk_reconcile_condition for the
// condition type and status of an object, -1 when there is none.
func conditionValue(g Gomega, kind, ns, name, condType, status string) float64 {
	for _, m := range gotkSeries(g, "gotk_reconcile_condition", kind, ns, name) {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["type"] == condType && labels["status"] == status {
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// TestReconcileMetricsAreFluxs: every reconcile records Flux's
// gotk_reconcile_duration_seconds and gotk_reconcile_condition for the
// object, as Flux's dashboards and alerts read them, and a deleted object's
// series go away.
func TestReconcileMetricsAreFluxs(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/api", "1.0.0")
	newRepository(t, ns, reg.Image("acme/api"))
	pol := newPolicy(t, ns, "api", semverChoice(">=1.0.0"))

	g.Eventually(func(g Gomega) {
		g.Expect(conditionValue(g, "ImagePolicy", ns, "api", "Ready", "True")).To(Equal(1.0))
		g.Expect(conditionValue(g, "ImagePolicy", ns, "api", "Ready", "False")).To(Equal(0.0))
		g.Expect(conditionValue(g, "ImagePolicy", ns, "api", "Stalled", "True")).To(Equal(0.0))
		durations := gotkSeries(g, "gotk_reconcile_duration_seconds", "ImagePolicy", ns, "api")
		g.Expect(durations).To(HaveLen(1))
		g.Expect(durations[0].GetHistogram().GetSampleCount()).To(BeNumerically(">=", 1))
		g.Expect(gotkSeries(g, "gotk_reconcile_duration_seconds", "ImageRepository", ns, "repo")).To(HaveLen(1))
	}).Should(Succeed())

	// A policy that can never select is Stalled, and the gauge says so.
	g.Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pol), pol); err != nil {
			return err
		}
		pol.Spec.Policy = semverChoice("not a range")
		return k8s.Update(context.Background(), pol)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(conditionValue(g, "ImagePolicy", ns, "api", "Stalled", "True")).To(Equal(1.0))
		g.Expect(conditionValue(g, "ImagePolicy", ns, "api", "Ready", "False")).To(Equal(1.0))
	}).Should(Succeed())

	g.Expect(k8s.Delete(context.Background(), pol)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(gotkSeries(g, "gotk_reconcile_condition", "ImagePolicy", ns, "api")).To(BeEmpty())
		g.Expect(gotkSeries(g, "gotk_reconcile_duration_seconds", "ImagePolicy", ns, "api")).To(BeEmpty())
	}).Should(Succeed())
}
