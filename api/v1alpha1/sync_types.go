package v1alpha1

import (
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// SyncKind is the kind name of Sync.
const SyncKind = "Sync"

// PruneAnnotation set to "enabled" on a CustomResourceDefinition or
// Namespace in Git lets a Sync delete it once it leaves the revision.
const PruneAnnotation = "uprev.dev/prune"

// ReconcileAnnotation set to "disabled" on an object makes a Sync leave it
// alone: neither changed nor pruned.
const ReconcileAnnotation = "uprev.dev/reconcile"

// SyncSpec is what a Sync should apply, and where.
type SyncSpec struct {
	// Interval between two reconciles; drift is corrected on each. At
	// least 30s: a Sync runs again at once for a commit uprev pushed, a
	// Git push webhook, a reconcile request or a change of its spec.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="interval must be at least 30s"
	// +required
	Interval metav1.Duration `json:"interval"`

	// Git is the repository and revision applied.
	// +required
	Git GitSource `json:"git"`

	// Path, relative to the repository root, of plain YAML files or of a
	// kustomization.yaml.
	// +optional
	Path string `json:"path,omitempty"`

	// Targets are the clusters applied to.
	// +kubebuilder:validation:MinItems=1
	// +required
	Targets []Target `json:"targets"`

	// Rollout applies the targets in waves.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`

	// Prune deletes objects that left the revision.
	// +optional
	Prune bool `json:"prune,omitempty"`

	// Wait health-checks what was applied before a target counts as done.
	// +optional
	Wait bool `json:"wait,omitempty"`

	// Timeout for applying and health-checking one target. Default: the interval.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// ServiceAccountName is impersonated when applying to the cluster uprev
	// runs in.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Suspend stops further reconciles.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// Target is one cluster a Sync applies to, by name, or every cluster
// whose kubeconfig Secret a selector selects, or every Cluster API Cluster
// a clusterSelector selects.
// +kubebuilder:validation:XValidation:rule="(has(self.name) ? 1 : 0) + (has(self.selector) ? 1 : 0) + (has(self.clusterSelector) ? 1 : 0) == 1",message="a target has one of name, selector and clusterSelector"
// +kubebuilder:validation:XValidation:rule="has(self.name) || !has(self.kubeConfig)",message="a selector's targets are its Secrets: kubeConfig goes with a name"
type Target struct {
	// Name of the target, used in waves and status.
	// +optional
	Name string `json:"name,omitempty"`

	// KubeConfig of a remote cluster. Unset means the cluster uprev runs in.
	// +optional
	KubeConfig *KubeConfigReference `json:"kubeConfig,omitempty"`

	// Selector makes a target of every kubeconfig Secret of the Sync's
	// namespace with these labels, named by its TargetNameLabel or else by
	// the Secret's name. A Secret that gains the labels is applied to in
	// the next wave that includes it; one that loses them is released: its
	// objects are left in place, as a target removed from the list. The
	// kubeconfig rules of a named target apply to each.
	// +optional
	Selector *TargetSelector `json:"selector,omitempty"`

	// ClusterSelector makes a target of every Cluster API Cluster
	// (cluster.x-k8s.io) of the Sync's namespace with these labels, named
	// by its TargetNameLabel or else by the Cluster's name, reached through
	// the kubeconfig Secret Cluster API writes for it
	// (`<cluster>-kubeconfig`, key `value`). A Cluster whose control plane
	// is not initialized yet, or whose kubeconfig Secret does not exist
	// yet, waits outside the rollout: its SyncTarget says so (reason
	// ClusterNotProvisioned) and it joins the next wave that includes it
	// once ready. A Cluster deleted, or that loses the labels, is released
	// as a target removed from the list. Rollout step selectors match the
	// Cluster's labels. The kubeconfig rules of a named target apply to
	// each.
	// +optional
	ClusterSelector *TargetSelector `json:"clusterSelector,omitempty"`
}

// Selects says whether the target stands for the targets a selector
// selects (selector or clusterSelector) rather than for one named target.
func (t Target) Selects() bool {
	return t.Selector != nil || t.ClusterSelector != nil
}

// TargetNameLabel, on a kubeconfig Secret or a Cluster that a Sync
// selects, names the target; the Secret's name does when it is absent.
const TargetNameLabel = "uprev.dev/target-name"

// TargetSelector selects kubeconfig Secrets by label.
type TargetSelector struct {
	// MatchLabels are the labels a Secret must have, all of them.
	// +kubebuilder:validation:MinProperties=1
	// +required
	MatchLabels map[string]string `json:"matchLabels"`
}

// KubeConfigReference points at a Secret holding a kubeconfig in its `value` key.
type KubeConfigReference struct {
	// SecretRef names the Secret in the Sync's namespace.
	// +required
	SecretRef meta.LocalObjectReference `json:"secretRef"`
}

// Rollout applies targets in waves with a health gate between them.
// +kubebuilder:validation:XValidation:rule="!(has(self.waves) && has(self.steps))",message="a rollout has waves or steps, not both"
type Rollout struct {
	// Waves lists groups of target names. A wave starts once the previous
	// one applied the same revision and is healthy. Targets named in no wave
	// form a last wave.
	// +optional
	Waves [][]string `json:"waves,omitempty"`

	// PauseBetweenWaves is waited after a wave is healthy.
	// +optional
	PauseBetweenWaves metav1.Duration `json:"pauseBetweenWaves,omitempty"`

	// Steps, instead of waves, group the targets for fleets: each step
	// takes, from the targets in no earlier step, in order (named targets
	// as listed, then selected ones by name), those its selector selects,
	// or as many as bring the targets of this and the earlier steps to its
	// count or percent of all targets (rounded up). Targets in no step
	// form a last step. A step starts once the earlier ones applied the
	// revision (and are healthy, when the Sync waits) and their pause is
	// over. A new revision starts again from the first step.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Steps []RolloutStep `json:"steps,omitempty"`

	// MaxConcurrent is how many targets are applied at once. Default: 32.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxConcurrent int `json:"maxConcurrent,omitempty"`

	// MaxFailures is how many targets (a count, or a percent of all
	// targets such as "10%") may fail the revision while the rollout goes
	// on to the next steps; past it, the rollout stops, and the Sync says
	// so with reason RolloutStopped. Default: 0, any failure stops it.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxFailures *intstr.IntOrString `json:"maxFailures,omitempty"`
}

// RolloutStep is one step of a rollout: a selector, a count or a percent.
// +kubebuilder:validation:XValidation:rule="(has(self.selector) ? 1 : 0) + (has(self.count) ? 1 : 0) + (has(self.percent) ? 1 : 0) == 1",message="a step has one of selector, count and percent"
type RolloutStep struct {
	// Selector takes the targets whose kubeconfig Secret (selected by
	// spec.targets[].selector) or Cluster (selected by
	// spec.targets[].clusterSelector) has these labels.
	// +optional
	Selector *TargetSelector `json:"selector,omitempty"`
	// Count brings the targets rolled out to this many.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Count *int `json:"count,omitempty"`
	// Percent brings the targets rolled out to this percent of all.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Percent *int `json:"percent,omitempty"`
	// Pause is waited after the step is done before the next starts.
	// +optional
	Pause metav1.Duration `json:"pause,omitempty"`
}

// SyncStatus is what a Sync last did.
type SyncStatus struct {
	// ObservedGeneration is the generation last reconciled successfully or
	// found to be misconfigured.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// LastAttemptedRevision is the revision last fetched, as `<ref>@sha1:<commit>`.
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`

	// Steps counts the targets of each rollout step (each wave, in
	// order), by where they are with the revision last fetched. Each
	// target's own state is in its SyncTarget.
	// +optional
	Steps []StepStatus `json:"steps,omitempty"`

	// Targets held each target's state before SyncTargets did. A Sync
	// written by an earlier uprev is read once: each entry becomes its
	// target's SyncTarget, then the list is emptied. Readers get targets'
	// state from their SyncTargets (internal/fleet.AttachTargets).
	// +optional
	Targets []TargetStatus `json:"targets,omitempty"`

	// Conditions: Ready, Reconciling, Stalled.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	meta.ReconcileRequestStatus `json:",inline"`
}

// Target returns the status of the target named name, or nil when it has
// none. It is the one lookup of a target's status by name.
func (in *SyncStatus) Target(name string) *TargetStatus {
	for i := range in.Targets {
		if in.Targets[i].Name == name {
			return &in.Targets[i]
		}
	}
	return nil
}

// StepStatus counts the targets of one rollout step.
type StepStatus struct {
	// Revision is the newest revision the step's rollout started with.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Targets is how many targets the step holds.
	Targets int `json:"targets"`
	// OnRevision is how many applied the Sync's lastAttemptedRevision.
	OnRevision int `json:"onRevision"`
	// Healthy is how many of those passed their health checks, which run
	// only when the Sync waits (spec.wait).
	Healthy int `json:"healthy"`
	// Failed is how many tried that revision and did not apply it.
	Failed int `json:"failed"`
	// Waiting is how many have not tried it yet.
	Waiting int `json:"waiting"`
}

// TargetStatus is the state of one target.
type TargetStatus struct {
	// Name of the target.
	Name string `json:"name"`
	// LastAppliedRevision is the last revision applied whole (and healthy,
	// when the Sync waits).
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`
	// LastAttemptedRevision is the last revision tried.
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`
	// LastAppliedTime is when the last revision was applied.
	// +optional
	LastAppliedTime *metav1.Time `json:"lastAppliedTime,omitempty"`
	// Healthy says whether the applied objects passed their health checks.
	// +optional
	Healthy bool `json:"healthy,omitempty"`
	// HealthySince is when the target became healthy on its
	// lastAppliedRevision; it is kept while every health check of that
	// revision passes, and cleared when one fails or the revision changes
	// and is not healthy yet.
	// +optional
	HealthySince *metav1.Time `json:"healthySince,omitempty"`
	// Message says what failed, when something did.
	// +optional
	Message string `json:"message,omitempty"`
	// Reason is ClusterNotProvisioned while the target, selected through
	// its Cluster API Cluster, waits outside the rollout for the Cluster's
	// control plane or kubeconfig Secret; empty otherwise.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Inventory lists the objects applied, for pruning.
	// +optional
	Inventory []InventoryEntry `json:"inventory,omitempty"`
	// Components lists the container images of the last revision applied
	// whole (lastAppliedRevision): one entry per image, tag and digest in
	// the pod templates of its Deployments, StatefulSets, DaemonSets,
	// ReplicaSets, Jobs, CronJobs and Pods. It is sorted by image, tag and
	// digest, and holds at most 128 entries; componentsOmitted counts the
	// rest.
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Components []AppliedComponent `json:"components,omitempty"`
	// ComponentsOmitted is how many components did not fit in Components.
	// +optional
	ComponentsOmitted int `json:"componentsOmitted,omitempty"`
}

// MaxTargetComponents bounds status.targets[].components, so a revision with
// very many images cannot make a Sync's status too large to write.
const MaxTargetComponents = 128

// AppliedComponent is one container image a target runs, as the applied
// manifests name it.
type AppliedComponent struct {
	// Image is the image repository, without tag or digest, as written in
	// the manifests (for example ghcr.io/acme/agent).
	Image string `json:"image"`
	// Tag is the image's tag; empty when the manifest pins a digest alone.
	// +optional
	Tag string `json:"tag,omitempty"`
	// Digest is the digest the manifest pins (sha256:...), when it pins one.
	// +optional
	Digest string `json:"digest,omitempty"`
}

// InventoryEntry identifies one applied object.
type InventoryEntry struct {
	// ID is `<namespace>_<name>_<group>_<kind>`.
	ID string `json:"id"`
	// Version is the API version the object was applied with.
	Version string `json:"v"`
}

// Sync applies a Git path onto one or many clusters.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.lastAttemptedRevision`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Sync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SyncSpec   `json:"spec,omitempty"`
	Status SyncStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (in *Sync) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *Sync) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetRequeueAfter returns the interval between reconciles.
func (in *Sync) GetRequeueAfter() time.Duration { return in.Spec.Interval.Duration }

// GetTimeout returns the timeout for one target.
func (in *Sync) GetTimeout() time.Duration {
	if in.Spec.Timeout != nil {
		return in.Spec.Timeout.Duration
	}
	return in.Spec.Interval.Duration
}

// SyncList is a list of Syncs.
//
// +kubebuilder:object:root=true
type SyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sync `json:"items"`
}
