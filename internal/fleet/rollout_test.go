package fleet

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRollouts(t *testing.T) {
	g := NewWithT(t)
	in := fleetInputs()
	prod := &in.Syncs[1]
	prod.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Message: "rollout of main@sha1:2: 1 of 3 waves done"}}
	rollouts := Rollouts(in.Syncs)
	g.Expect(rollouts).To(HaveLen(2))
	g.Expect(rollouts[0].Name).To(Equal("staging"), "by namespace, then name")
	r := rollouts[1]
	g.Expect(r.Namespace + "/" + r.Name).To(Equal(ns + "/prod"))
	g.Expect(r.Revision).To(Equal("main@sha1:2"))
	g.Expect(r.Ready).To(Equal("False"))
	g.Expect(r.Status).To(Equal("rollout of main@sha1:2: 1 of 3 waves done"))
	g.Expect(r.Waves).To(HaveLen(3))
	g.Expect(r.Waves[0].Targets).To(ConsistOf(HaveField("Name", "local")))
	g.Expect(r.Waves[1].Targets).To(ConsistOf(And(HaveField("Name", "eu-1"), HaveField("Failed", true), HaveField("Waiting", false))))
	g.Expect(r.Waves[2].Targets).To(ConsistOf(And(HaveField("Name", "us-1"), HaveField("Waiting", true), HaveField("AppliedRevision", "main@sha1:1"))))
	g.Expect(r.WaitingWave).To(Equal(3), "us-1's wave has not started on main@sha1:2")
	g.Expect(r.Waves[0].Targets[0].Components).To(ContainElement(Component{Image: "index.docker.io/library/redis", Version: Version{Tag: "7.2.4"}}), "images are canonical")
	g.Expect(rollouts[0].Waves[0].Targets).To(HaveLen(2), "a Sync without waves has one")
	g.Expect(rollouts[0].WaitingWave).To(BeZero())
}
