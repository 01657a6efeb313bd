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
	// PromotionSyncNotFoundReason: spec.promotion.sync names no Sync of
	// the gate's namespace.
	PromotionSyncNotFoundReason = "PromotionSyncNotFound"
	// PromotionTargetNotFoundReason: spec.promotion.targets names a target
	// the Sync does not have.
	PromotionTargetNotFoundReason = "PromotionTargetNotFound"
	// PromotionNeverHealthyReason: the promotion's Sync does not check
	// health (spec.wait is false), so its targets never report healthy and
	// no version could ever pass the gate.
	PromotionNeverHealthyReason = "PromotionNeverHealthy"
	// GateReleasedReason is the reason of the Event on an ImagePolicy when
	// a version that waited at a ReleaseGate becomes its latest.
	GateReleasedReason = "GateReleased"
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
// +kubebuilder:validation:XValidation:rule="!has(self.attestations) || (has(self.verify) && (!has(self.verify.provider) || self.verify.provider == 'cosign'))",message="spec.attestations needs spec.verify with provider cosign: attestations count only when signed as it says"
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
	// Promotion holds a version back until the targets of an earlier
	// stage's Sync run it and have been healthy for long enough.
	// +optional
	Promotion *Promotion `json:"promotion,omitempty"`
	// Attestations lets a version through only when the digest its policy
	// would write carries in-toto attestations, signed with the keys or
	// keyless identities of spec.verify, that say what this asks:
	// provenance from the right builder and repository, an SBOM, a recent
	// vulnerability scan with nothing too severe.
	// +optional
	Attestations *Attestations `json:"attestations,omitempty"`
}

// Attestations are the in-toto attestations a version's digest must
// carry, read from the Sigstore bundles among its OCI referrers (what
// `cosign attest` and GitHub artifact attestations push).
// +kubebuilder:validation:XValidation:rule="has(self.slsaProvenance) || (has(self.sbom) && self.sbom) || has(self.vulnerabilities)",message="name at least one of slsaProvenance, sbom, vulnerabilities"
type Attestations struct {
	// SLSAProvenance requires SLSA provenance (v1, or v0.2) naming this
	// builder and source repository.
	// +optional
	SLSAProvenance *SLSAProvenance `json:"slsaProvenance,omitempty"`
	// SBOM requires an SPDX or CycloneDX attestation.
	// +optional
	SBOM bool `json:"sbom,omitempty"`
	// Vulnerabilities requires a vulnerability scan attestation (the
	// in-toto vulns predicate) no older than maxAge that reports nothing
	// above maxSeverity.
	// +optional
	Vulnerabilities *Vulnerabilities `json:"vulnerabilities,omitempty"`
}

// SLSAProvenance is what an SLSA provenance attestation must name.
type SLSAProvenance struct {
	// BuilderID is the builder's id, exactly
	// (https://github.com/actions/runner/github-hosted for GitHub's
	// hosted runners).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	BuilderID string `json:"builderID"`
	// SourceRepository is the repository built from, exactly
	// (https://github.com/acme/agent).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	SourceRepository string `json:"sourceRepository"`
	// WorkflowRef is a regular expression the ref built must match
	// (^refs/tags/v); unset matches any.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	WorkflowRef string `json:"workflowRef,omitempty"`
}

// Vulnerabilities is what a vulnerability scan attestation must say.
type Vulnerabilities struct {
	// MaxSeverity is the highest severity a finding may have.
	// +kubebuilder:validation:Enum=NONE;LOW;MEDIUM;HIGH
	// +required
	MaxSeverity string `json:"maxSeverity"`
	// MaxAge is how old the newest scan may be, as a Go duration (168h).
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:MaxLength=32
	// +required
	MaxAge string `json:"maxAge"`
}

// Promotion lets a version through once every listed target of a Sync of
// the gate's namespace has applied a revision that runs the version's
// image at its digest (its tag, when the policy reflects no digest), and
// has been healthy since for HealthyFor.
type Promotion struct {
	// Sync names a Sync of the gate's namespace; a Sync of another
	// namespace cannot be named.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
	// +required
	Sync string `json:"sync"`
	// Targets are the names of the Sync's targets that must run the
	// version; empty means all of them.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Targets []string `json:"targets,omitempty"`
	// HealthyFor is how long each target must have been healthy on the
	// version (its status.targets[].healthySince), as a Go duration (24h).
	// Unset or 0: applied and healthy once.
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:MaxLength=32
	// +optional
	HealthyFor string `json:"healthyFor,omitempty"`
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
	// SignedBy is what this gate's verify accepted the digest's signature
	// with: "key <entry of the Secret>", or "keyless identity <subject>,
	// issuer <issuer>"; unset without verify.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	SignedBy string `json:"signedBy,omitempty"`
	// Promoted are the targets of this gate's promotion Sync that run the
	// version healthy, and since when; unset without promotion.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Promoted []PromotedTarget `json:"promoted,omitempty"`
}

// PromotedTarget is a target of an earlier stage that runs a version
// healthy.
type PromotedTarget struct {
	// Sync names the earlier stage's Sync.
	Sync string `json:"sync"`
	// Target names its target.
	Target string `json:"target"`
	// HealthySince is when the target became healthy on the version.
	HealthySince metav1.Time `json:"healthySince"`
}

// WaitingVersion is a version a gate holds back.
type WaitingVersion struct {
	// Tag is the image tag.
	Tag string `json:"tag"`
	// Gate is what holds it back: minReleaseAge, promotion, or verify for
	// a version whose signature does not verify.
	Gate string `json:"gate"`
	// EligibleAt is when this gate lets it through; unset when no time
	// will by itself (a promotion waiting for the earlier stage to run the
	// version, or to be healthy) and for a refused signature.
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
// +kubebuilder:printcolumn:name="Promotion",type=string,JSONPath=`.spec.promotion.sync`
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
