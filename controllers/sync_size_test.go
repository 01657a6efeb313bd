package controllers

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// maxWrittenObject is the size no object uprev writes may reach, whatever
// the fleet: well under etcd's 1.5 MiB request limit.
const maxWrittenObject = 256 << 10

// TestNoWrittenObjectGrowsWithTheFleet: with 1,000 targets, each named in
// the spec (the largest a Sync's spec gets), of a 300-object revision
// with as many images as a record keeps, the Sync and each SyncTarget stay
// under 256 KiB.
func TestNoWrittenObjectGrowsWithTheFleet(t *testing.T) {
	g := NewWithT(t)
	const targets, objects = 1000, 300
	ns := strings.Repeat("n", 63)
	s := &uprevv1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.Repeat("s", 253)}}
	s.Spec.Rollout = &uprevv1.Rollout{}
	for i := range targets {
		name := fmt.Sprintf("cluster-%04d-%s", i, strings.Repeat("x", 40))
		s.Spec.Targets = append(s.Spec.Targets, uprevv1.Target{Name: name, KubeConfig: &uprevv1.KubeConfigReference{SecretRef: metaRef(name + "-kubeconfig")}})
	}
	waves, err := s.Spec.RolloutWaves()
	g.Expect(err).NotTo(HaveOccurred())
	revision := "main@sha1:" + strings.Repeat("f", 40)
	s.Status.LastAttemptedRevision = revision
	s.Status.Steps = stepCounts(waves, nil, revision, func(string) *uprevv1.TargetStatus { return nil })

	now := metav1.NewTime(time.Now())
	rec := newRecord(s, s.Spec.Targets[0])
	st := &rec.obj.Status
	st.LastAppliedRevision, st.LastAttemptedRevision, st.LastAppliedTime = revision, revision, &now
	st.Message = cutMessage(strings.Repeat("m", 1<<20), maxTargetMessage)
	for i := range objects {
		st.Inventory = append(st.Inventory, uprevv1.InventoryEntry{
			ID: fmt.Sprintf("%s_%s-%04d_apps_Deployment", ns, strings.Repeat("o", 200), i), Version: "v1"})
	}
	for i := range uprevv1.MaxTargetComponents {
		st.Components = append(st.Components, uprevv1.AppliedComponent{
			Image: fmt.Sprintf("registry.example.com/%s/image-%03d", strings.Repeat("r", 100), i), Tag: "1.0.0",
			Digest: "sha256:" + strings.Repeat("d", 64)})
	}
	for name, obj := range map[string]any{"Sync": s, "SyncTarget": rec.obj} {
		data, err := json.Marshal(obj)
		g.Expect(err).NotTo(HaveOccurred())
		t.Logf("%s: %d bytes", name, len(data))
		g.Expect(len(data)).To(BeNumerically("<", maxWrittenObject), name)
	}
}
