package v1alpha1

import (
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReleaseGateKind is the kind name of ReleaseGate.
const ReleaseGateKind = "ReleaseGate"

// Reasons of ReleaseGate conditions.
const (
	// InvalidDurationReason: a duration of the spec does not parse.
	InvalidDurationReason = "InvalidDuration"
	// InvalidSelectorReason: spec.policySelector does not parse.
	InvalidSelectorReason = "InvalidSelector"
	// ReleaseGatedReason: release gates hold back every version an
	// ImagePolicy would select; it keeps its latestRef meanwhile.
	ReleaseGatedReason = "ReleaseGated"
	// VerificationFailedReason: the signatures of a version could not be
	// read (the registry failed); the ImagePolicy keeps its latestRef.
	VerificationFailedReason = "VerificationFailed"
	// GateInvalidReason: an ImagePolicy is selected by a ReleaseGate whose
	// spec is invalid, and keeps its latestRef until the gate is fixed.
	GateInvalidReason = "ReleaseGateInvalid"
)

// MaxGatedPolicies bounds status.policies of a ReleaseGate, and
// MaxWaitingVersions the waiting versions of each, so that a gate over
// many policies or busy release trains keeps a status small enough to
// write.
const (
	MaxGatedPolicies   = 100
	MaxWaitingVersions = 20
)

// ReleaseGateSpec says which ImagePolicies a ReleaseGate gates and how.
type ReleaseGateSpec struct {
	// PolicySelector selects the ImagePolicies of the gate's namespace it
	// gates; an empty selector selects all of them.
	PolicySelector metav1.LabelSelector `json:"policySelector"`
	// MinReleaseAge holds a version back until this long after uprev's
	// scans first saw its tag, as a Go duration (72h). Unset or 0 sets no
	// age.
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:MaxLength=32
	// +optional
	MinReleaseAge string `json:"minReleaseAge,omitempty"`
	// Verify lets a version through only when the digest its policy
	// would write carries a signature this spec accepts, in the shape of
	// Flux's OCIRepository spec.verify: cosign with the public keys of
	// secretRef (*.pub), or keyless with matchOIDCIdentity and the trusted
	// root of trustedRootSecretRef (trusted_root.json; public Sigstore's
	// when unset). A version refused is listed in status with the reason.
	// +optional
	Verify *sourcev1.OCIRepositoryVerification `json:"verify,omitempty"`
}

// ReleaseGateStatus reports, per gated ImagePolicy, what it selects and
// what waits at this gate.
type ReleaseGateStatus struct {
	// ObservedGeneration is the last generation reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Reconciling, Stalled.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Policies are the ImagePolicies the gate selects, by name, at most
	// 100.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Policies []GatedPolicy `json:"policies,omitempty"`

	meta.ReconcileRequestStatus `json:",inline"`
}

// GatedPolicy is one ImagePolicy a ReleaseGate selects.
type GatedPolicy struct {
	// Name is the ImagePolicy's name.
	Name string `json:"name"`
	// Latest is what the policy now selects; unset while gates hold back
	// every version.
	// +optional
	Latest *GatedVersion `json:"latest,omitempty"`
	// Waiting are the versions newer than Latest that this gate holds
	// back, newest first, at most 20.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Waiting []WaitingVersion `json:"waiting,omitempty"`
}

// GatedVersion is a version an ImagePolicy selects.
type GatedVersion struct {
	// Tag is the image tag.
	Tag string `json:"tag"`
	// Digest is the tag's digest, when the policy reflects one.
	// +optional
	Digest string `json:"digest,omitempty"`
}

// WaitingVersion is a version a gate holds back.
type WaitingVersion struct {
	// Tag is the image tag.
	Tag string `json:"tag"`
	// Gate is what holds it back: minReleaseAge, or verify for a version
	// whose signature does not verify.
	Gate string `json:"gate"`
	// EligibleAt is when this gate lets it through; unset for a refused
	// signature.
	// +optional
	EligibleAt *metav1.Time `json:"eligibleAt,omitempty"`
	// Reason says why, for a person; for verify, the refusal: unsigned,
	// wrong key, identity mismatch or untrusted chain.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// ReleaseGate holds versions back from the ImagePolicies it selects until
// they pass its gates; a gated policy's latestRef is the newest version
// its own rules pick that passes every gate.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="MinReleaseAge",type=string,JSONPath=`.spec.minReleaseAge`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ReleaseGate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ReleaseGateSpec   `json:"spec,omitempty"`
	Status ReleaseGateStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (in *ReleaseGate) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *ReleaseGate) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// ReleaseGateList is a list of ReleaseGates.
//
// +kubebuilder:object:root=true
type ReleaseGateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReleaseGate `json:"items"`
}
