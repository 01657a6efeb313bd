// Package v1alpha1 holds uprev's own API types, UpdateAutomation, Sync,
// ReleaseGate and ReleaseSource, in the group uprev.dev.
//
// +kubebuilder:object:generate=true
// +groupName=uprev.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of uprev's own kinds.
	GroupVersion = schema.GroupVersion{Group: "uprev.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this group with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the kinds of this group. The package depends on
// apimachinery only, so that other projects can import the types.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &UpdateAutomation{}, &UpdateAutomationList{}, &Sync{}, &SyncList{}, &SyncTarget{}, &SyncTargetList{}, &ReleaseGate{}, &ReleaseGateList{}, &ReleaseSource{}, &ReleaseSourceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
