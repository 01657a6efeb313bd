package v1alpha1

import (
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpdateAutomationKind is the kind name of UpdateAutomation.
const UpdateAutomationKind = "UpdateAutomation"

// HoldReleaseAnnotation, set on an UpdateAutomation to `<namespace>/<policy>
// <version>` (several separated by commas, or `*` for all), releases those
// holds: the automation writes the held version again if its policy still
// selects it.
const HoldReleaseAnnotation = "uprev.dev/release-holds"

// UpdateAutomationSpec is what an UpdateAutomation should do.
type UpdateAutomationSpec struct {
	// Interval between two runs. At least 30s: an automation runs again
	// at once when a policy it follows selects a new version, for a Git
	// push webhook, a reconcile request or a change of its spec.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="interval must be at least 30s"
	// +required
	Interval metav1.Duration `json:"interval"`

	// Git is the repository written to, and how commits are made.
	// +required
	Git GitSpec `json:"git"`

	// Update says which files may be rewritten.
	// +optional
	Update UpdateStrategy `json:"update,omitempty"`

	// PolicySelector picks the ImagePolicies of the automation's namespace
	// whose versions are written. Unset means all of them.
	// +optional
	PolicySelector *metav1.LabelSelector `json:"policySelector,omitempty"`

	// CRDs lists CustomResourceDefinition bundles that ship inside the
	// artifacts the policies select, written next to the version bump.
	// +optional
	CRDs []CRDBundle `json:"crds,omitempty"`

	// AllowDowngrade lets a policy move Git to a lower version than the one
	// there. By default such a change is refused and reported.
	// +optional
	AllowDowngrade bool `json:"allowDowngrade,omitempty"`

	// Suspend stops further runs; a run under way finishes.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// GitSpec is the repository an UpdateAutomation reads and writes.
type GitSpec struct {
	GitSource `json:",inline"`

	// Push names the branch commits are pushed to. Default: the checkout
	// branch. A new push branch starts from the checkout branch; an existing
	// one is brought up to date with it before each commit.
	// +optional
	Push *PushSpec `json:"push,omitempty"`

	// Commit says who authors commits, how they are signed and what their
	// message says.
	// +required
	Commit CommitSpec `json:"commit"`
}

// PushSpec names the branch commits are pushed to.
type PushSpec struct {
	// Branch to push to.
	// +required
	Branch string `json:"branch"`

	// PullRequest opens or updates a pull request from Branch after each
	// push; only when Branch differs from the checkout branch. See
	// docs/pull-requests.md.
	// +optional
	PullRequest *PullRequestSpec `json:"pullRequest,omitempty"`
}

// CommitSpec says how automation commits are made.
type CommitSpec struct {
	// Author of the commits.
	// +required
	Author CommitUser `json:"author"`

	// SigningKey signs the commits: a Secret with `git.asc` (an armored
	// OpenPGP private key, `passphrase` optional) or `identity` (an SSH
	// private key, signed in git's SSH signature format).
	// +optional
	SigningKey *SigningKey `json:"signingKey,omitempty"`

	// MessageTemplate is a Go text/template over the run's changes; see
	// docs/api.md. Empty means the default message, which lists every change.
	// +optional
	MessageTemplate string `json:"messageTemplate,omitempty"`
}

// CommitUser is the name and email written in a commit.
type CommitUser struct {
	// Name of the author.
	// +required
	Name string `json:"name"`

	// Email of the author.
	// +required
	Email string `json:"email"`
}

// SigningKey points at the Secret holding a commit signing key.
type SigningKey struct {
	// SecretRef names the Secret in the automation's namespace.
	// +required
	SecretRef meta.LocalObjectReference `json:"secretRef"`
}

// UpdateStrategy says which files an automation may rewrite.
type UpdateStrategy struct {
	// Path, relative to the repository root, under which files with markers
	// are rewritten. Default: the whole repository.
	// +optional
	Path string `json:"path,omitempty"`
}

// CRDBundle takes the CRD manifests out of the artifact a policy selected
// and writes them into Git with the version bump.
type CRDBundle struct {
	// PolicyRef names the ImagePolicy whose selected artifact holds the CRDs.
	// +required
	PolicyRef meta.LocalObjectReference `json:"policyRef"`

	// From says where in the artifact the CRDs are.
	// +required
	From CRDSource `json:"from"`

	// Path, relative to the repository root, the CRDs are written to, one
	// file per CRD.
	// +required
	Path string `json:"path"`

	// Prune removes CRD files that the new version no longer ships. Off by
	// default, because deleting a CRD deletes every object of its kind.
	// +optional
	Prune bool `json:"prune,omitempty"`
}

// CRDSource is where the CRDs are found in an artifact; exactly one field is set.
type CRDSource struct {
	// Chart reads the `crds/` folder of a Helm chart stored in an OCI registry.
	// +optional
	Chart *ChartSource `json:"chart,omitempty"`

	// Image reads CRD files under a path of a container image's filesystem.
	// +optional
	Image *ImageSource `json:"image,omitempty"`

	// Artifact reads the layer of the given media type of an OCI artifact.
	// +optional
	Artifact *ArtifactSource `json:"artifact,omitempty"`
}

// ChartSource reads the CRDs of a Helm chart.
type ChartSource struct{}

// ImageSource reads CRDs from a container image's filesystem.
type ImageSource struct {
	// Path of the folder in the image holding CRD YAML.
	// +required
	Path string `json:"path"`

	// Platform of a multi-arch image, such as linux/arm64. Default: linux/amd64.
	// +optional
	Platform string `json:"platform,omitempty"`
}

// ArtifactSource reads CRDs from a tar+gzip layer of an OCI artifact.
type ArtifactSource struct {
	// MediaType of the layer, such as application/vnd.cncf.flux.content.v1.tar+gzip.
	// +required
	MediaType string `json:"mediaType"`
}

// UpdateAutomationStatus is what an UpdateAutomation last did.
type UpdateAutomationStatus struct {
	// ObservedGeneration is the generation last reconciled successfully or
	// found to be misconfigured.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// LastPushCommit is the SHA of the last commit pushed.
	// +optional
	LastPushCommit string `json:"lastPushCommit,omitempty"`

	// LastPushTime is when the last commit was pushed.
	// +optional
	LastPushTime *metav1.Time `json:"lastPushTime,omitempty"`

	// ObservedPolicies maps each selected policy's name to its latest ref as
	// last seen.
	// +optional
	ObservedPolicies map[string]ImageRef `json:"observedPolicies,omitempty"`

	// ObservedSourceRevision is the tip of the checkout branch, as
	// `<branch>@sha1:<commit>`, after the last run that wrote back (or found
	// nothing to write). A run whose branch tips, policies, holds, CRD
	// sources and generation are all unchanged since does no rewrite.
	// +optional
	ObservedSourceRevision string `json:"observedSourceRevision,omitempty"`

	// ObservedPushRevision is the tip of the push branch, as
	// `<branch>@sha1:<commit>`, when it differs from the checkout branch and
	// exists.
	// +optional
	ObservedPushRevision string `json:"observedPushRevision,omitempty"`

	// Holds are versions not written because a person reverted them.
	// +optional
	Holds []Hold `json:"holds,omitempty"`

	// RefusedDowngrades are changes not made because Git holds a higher
	// version than the policy selects.
	// +optional
	RefusedDowngrades []RefusedDowngrade `json:"refusedDowngrades,omitempty"`

	// CRDs reports each CRD bundle as of the last run.
	// +optional
	CRDs []CRDBundleStatus `json:"crds,omitempty"`

	// PullRequest is the pull request of the push branch, once a push was
	// made with spec.git.push.pullRequest set.
	// +optional
	PullRequest *PullRequestStatus `json:"pullRequest,omitempty"`

	// PullRequests are the pull requests of the groups, by group, when
	// spec.git.push.pullRequest.groupBy groups changes.
	// +optional
	PullRequests []PullRequestStatus `json:"pullRequests,omitempty"`

	// Conditions: Ready, Reconciling, Stalled.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	meta.ReconcileRequestStatus `json:",inline"`
}

// CRDBundleStatus is what a CRD bundle held when last read.
type CRDBundleStatus struct {
	// Policy is the ImagePolicy whose artifact ships the CRDs.
	Policy string `json:"policy"`
	// Path is where the CRDs are written.
	Path string `json:"path"`
	// Version is the tag the CRDs were read from.
	Version string `json:"version"`
	// Digest is the digest of the artifact the CRDs were read from.
	// +optional
	Digest string `json:"digest,omitempty"`
	// CRDs is the number of CRDs the artifact ships.
	CRDs int `json:"crds"`
	// Ignored is the number of documents in the artifact that are not CRDs
	// and were not written.
	// +optional
	Ignored int `json:"ignored,omitempty"`
	// Removed lists CRDs in Git that the version no longer ships; they are
	// kept unless the bundle prunes.
	// +optional
	Removed []string `json:"removed,omitempty"`
}

// ImageRef is an image name, tag and optional digest.
type ImageRef struct {
	// Name of the image, without tag.
	Name string `json:"name"`
	// Tag of the image.
	Tag string `json:"tag"`
	// Digest of the image, when the policy reports one.
	// +optional
	Digest string `json:"digest,omitempty"`
}

// Hold is a version the automation does not write, because a person
// reverted the commit that wrote it, or rejected it (`uprev reject`).
type Hold struct {
	// Policy is `<namespace>/<name>` of the ImagePolicy.
	Policy string `json:"policy"`
	// Version is the held tag.
	Version string `json:"version"`
	// RevertedIn is the SHA of the commit that holds the version: the
	// revert, or the commit that records the rejection.
	RevertedIn string `json:"revertedIn"`
	// Reason is why the version was rejected, as the rejection commit
	// says; empty for a revert. Anyone who can push to the branch writes
	// it: it is shown escaped.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// RefusedDowngrade is a change not made because it would lower a version.
type RefusedDowngrade struct {
	// Policy is `<namespace>/<name>` of the ImagePolicy.
	Policy string `json:"policy"`
	// File is the path of the file, relative to the repository root.
	File string `json:"file"`
	// Current is the version in Git.
	Current string `json:"current"`
	// Selected is the lower version the policy selected.
	Selected string `json:"selected"`
}

// UpdateAutomation writes the versions that ImagePolicies select into a Git
// repository as small, reviewable commits.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ua
// +kubebuilder:printcolumn:name="Last commit",type=string,JSONPath=`.status.lastPushCommit`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type UpdateAutomation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   UpdateAutomationSpec   `json:"spec,omitempty"`
	Status UpdateAutomationStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (in *UpdateAutomation) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *UpdateAutomation) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetRequeueAfter returns the interval between runs.
func (in *UpdateAutomation) GetRequeueAfter() time.Duration { return in.Spec.Interval.Duration }

// PushBranch returns the branch commits go to.
func (in *UpdateAutomation) PushBranch() string {
	if in.Spec.Git.Push != nil && in.Spec.Git.Push.Branch != "" {
		return in.Spec.Git.Push.Branch
	}
	return in.Spec.Git.Ref.Branch
}

// UpdateAutomationList is a list of UpdateAutomations.
//
// +kubebuilder:object:root=true
type UpdateAutomationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UpdateAutomation `json:"items"`
}
