package controllers

import (
	"context"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// getWithTargets reads s afresh, with status.targets filled from its
// SyncTargets in the order of spec.targets, as readers see a Sync.
func getWithTargets(g Gomega, s *uprevv1.Sync) {
	g.ExpectWithOffset(1, k8s.Get(context.Background(), client.ObjectKeyFromObject(s), s)).To(Succeed())
	statuses, err := targetStatuses(context.Background(), k8s, s)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	s.Status.Targets = nil
	for _, t := range s.Spec.Targets {
		if ts, ok := statuses[t.Name]; ok {
			s.Status.Targets = append(s.Status.Targets, ts)
		}
	}
}
