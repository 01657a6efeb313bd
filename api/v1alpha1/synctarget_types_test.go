package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestIsRecordOfBelievesOnlyTheSyncsOwnRecord(t *testing.T) {
	s := &Sync{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "apps", UID: "uid-1"}}
	own := func() *SyncTarget {
		return &SyncTarget{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "team", Name: SyncTargetName("apps", "prod"),
				Labels: map[string]string{SyncLabel: SyncLabelValue("apps")},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: GroupVersion.String(), Kind: SyncKind, Name: "apps", UID: "uid-1", Controller: ptr.To(true),
				}},
			},
			Spec: SyncTargetSpec{Sync: "apps", Target: "prod"},
		}
	}
	if !own().IsRecordOf(s) {
		t.Fatal("the Sync's own record is not believed")
	}
	for name, change := range map[string]func(*SyncTarget){
		"another namespace":         func(st *SyncTarget) { st.Namespace = "other" },
		"another Sync in spec":      func(st *SyncTarget) { st.Spec.Sync = "web" },
		"another target's name":     func(st *SyncTarget) { st.Spec.Target = "staging" },
		"no label":                  func(st *SyncTarget) { st.Labels = nil },
		"no owner":                  func(st *SyncTarget) { st.OwnerReferences = nil },
		"an earlier Sync's UID":     func(st *SyncTarget) { st.OwnerReferences[0].UID = "uid-0" },
		"an owner not controlling":  func(st *SyncTarget) { st.OwnerReferences[0].Controller = nil },
		"an owner of another group": func(st *SyncTarget) { st.OwnerReferences[0].APIVersion = "example.com/v1" },
	} {
		st := own()
		change(st)
		if st.IsRecordOf(s) {
			t.Errorf("a record with %s is believed", name)
		}
	}
}
