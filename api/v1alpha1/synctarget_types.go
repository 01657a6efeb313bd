package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncTargetKind is the kind name of SyncTarget.
const SyncTargetKind = "SyncTarget"

// SyncLabel, on a SyncTarget, names its Sync (SyncLabelValue), so that the
// records of one Sync are listed together.
const SyncLabel = "uprev.dev/sync"

// SyncTargetSpec says whose record a SyncTarget is.
type SyncTargetSpec struct {
	// Sync is the name of the Sync, in the same namespace.
	// +required
	Sync string `json:"sync"`
	// Target is the target's name in the Sync.
	// +required
	Target string `json:"target"`
	// KubeConfig is the target's kubeconfig Secret when the revision was
	// last applied, so that a deleted Sync prunes the target without
	// resolving its selectors again. Unset means the cluster uprev runs in.
	// +optional
	KubeConfig *KubeConfigReference `json:"kubeConfig,omitempty"`
}

// SyncTarget is the record of one target of a Sync: what was applied to
// it, when, how healthy, and the inventory pruning reads. The Sync
// controller writes one per target, owned by the Sync, in its namespace, so
// that no object grows with the fleet; the Sync itself keeps counts per
// rollout step. A person reads them with `kubectl get synctargets -l
// uprev.dev/sync=<sync>`.
//
// What a record says of its target is its status, a subresource that only
// uprev's manager may write: whoever may write SyncTargets cannot change
// it, and a record created by anyone else starts with an empty status.
// Readers believe a record only when IsRecordOf says it is the Sync's own.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Sync",type=string,JSONPath=`.spec.sync`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.target`
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.lastAppliedRevision`
// +kubebuilder:printcolumn:name="Healthy",type=boolean,JSONPath=`.status.healthy`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SyncTarget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SyncTargetSpec `json:"spec"`
	Status TargetStatus   `json:"status,omitempty"`
}

// SyncTargetList is a list of SyncTargets.
//
// +kubebuilder:object:root=true
type SyncTargetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SyncTarget `json:"items"`
}

// IsRecordOf tells whether st is the record uprev writes for one of the
// targets of s: in its namespace, named SyncTargetName of s and its
// target, labelled and naming s, and controlled (ownerReference) by this
// very Sync, by UID. A record that fails any of these, left by an earlier
// Sync of the same name or made by someone else, is not believed.
func (st *SyncTarget) IsRecordOf(s *Sync) bool {
	if st.Namespace != s.Namespace || st.Spec.Sync != s.Name || st.Labels[SyncLabel] != SyncLabelValue(s.Name) ||
		st.Name != SyncTargetName(s.Name, st.Spec.Target) {
		return false
	}
	owner := metav1.GetControllerOf(st)
	return owner != nil && owner.Kind == SyncKind && owner.Name == s.Name && owner.UID == s.UID && owner.UID != "" &&
		strings.HasPrefix(owner.APIVersion, GroupVersion.Group+"/")
}

// SyncLabelValue is the value of SyncLabel for the Sync named sync: its
// name, or, when longer than a label value may be, a prefix of it and a
// hash of the whole. Readers match spec.sync as well.
func SyncLabelValue(sync string) string {
	if len(sync) <= 63 {
		return sync
	}
	return strings.TrimRight(sync[:54], ".-") + "-" + shortHash(sync)
}

// SyncTargetName is the name of the record of target of the Sync named
// sync: both names, the target's made fit for an object name, and a hash
// of the pair, so that no two pairs share a record.
func SyncTargetName(sync, target string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(target) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := sync + "-" + b.String()
	// 253 characters at most, with "-" and 8 of hash.
	name = strings.TrimRight(name[:min(len(name), 244)], ".-")
	return name + "-" + shortHash(sync+"\x00"+target)
}

// shortHash is 8 hexadecimal digits of the SHA-256 of s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}
