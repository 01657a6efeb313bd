package controllers

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// fleetSize is how many targets the fleet-size test rolls out to: many
// kubeconfigs to the two remote control planes, as many as two cores
// allow.
const fleetSize = 300

// TestSyncOfThreeHundredTargets: one Sync selects 300 kubeconfig Secrets
// (to two API servers) and rolls out in steps of 1, 10%, 50% and 100%; it
// becomes Ready with every target's record readable, and deleting it
// prunes every target and removes the records.
func TestSyncOfThreeHundredTargets(t *testing.T) {
	g := NewWithT(t)
	ns, rc := twoRemoteTargets(t)
	for i := range fleetSize {
		kc := rc.euKC
		if i%2 == 1 {
			kc = rc.usKC
		}
		selectedSecret(t, ns, fmt.Sprintf("cluster-%03d", i), kc)
	}
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1") + "---\n" + configMap(ns, "extra", "x")})
	first := srv.Log(t, "fleet", "main")[0].SHA
	s := newSync(t, ns, url, "app", byLabel, func(s *uprevv1.Sync) {
		s.Spec.Rollout = &uprevv1.Rollout{Steps: []uprevv1.RolloutStep{{Count: ptr.To(1)}, {Percent: ptr.To(10)}, {Percent: ptr.To(50)}, {Percent: ptr.To(100)}}}
	})
	rev := "main@sha1:" + first
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, s)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(c.Message).To(HaveSuffix(fmt.Sprintf("to %d targets", fleetSize)))
		g.Expect(s.Status.Steps).To(Equal([]uprevv1.StepStatus{
			{Revision: rev, Targets: 1, OnRevision: 1},
			{Revision: rev, Targets: 29, OnRevision: 29},
			{Revision: rev, Targets: 120, OnRevision: 120},
			{Revision: rev, Targets: 150, OnRevision: 150},
		}))
	}).WithTimeout(5 * time.Minute).Should(Succeed())
	records := syncTargets(g, ns, s.Name)
	g.Expect(records).To(HaveLen(fleetSize))
	for _, st := range records {
		g.Expect(st.Status.LastAppliedRevision).To(Equal(rev), st.Spec.Target)
		g.Expect(st.Status.Inventory).To(HaveLen(2), st.Spec.Target)
	}

	deleteAndWaitGone(t, s)
	g.Expect(configMapExists(g, rc.euC, ns, "settings")).To(BeFalse())
	g.Expect(configMapExists(g, rc.usC, ns, "extra")).To(BeFalse())
	g.Expect(syncTargets(g, ns, s.Name)).To(BeEmpty())
}
