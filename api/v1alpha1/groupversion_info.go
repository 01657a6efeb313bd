// Package v1alpha1 holds uprev's own API types, UpdateAutomation and Sync,
// in the group uprev.dev.
//
// +kubebuilder:object:generate=true
// +groupName=uprev.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of uprev's own kinds.
	GroupVersion = schema.GroupVersion{Group: "uprev.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this group with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
