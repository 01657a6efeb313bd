package v1alpha1

import (
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReleaseSourceKind is the kind name of ReleaseSource.
const ReleaseSourceKind = "ReleaseSource"

// Reasons of ReleaseSource conditions.
const (
	// SourceUnreachableReason: the source's server could not be read (a
	// network error, a timeout, an HTTP error status); retried with
	// backoff, the last selection kept.
	SourceUnreachableReason = "SourceUnreachable"
	// SourceBusyReason (Reconciling): the source's server or its namespace
	// already holds its share (half) of the ReleaseSource workers; the
	// source is scanned when a share is given back, its Ready condition
	// left as it was.
	SourceBusyReason = "SourceBusy"
	// SourceInvalidReason: the server answered with something that is not
	// the source's format (HTML for a JSON feed, an index.yaml that does
	// not parse, a listing past the size bound); retried at the interval,
	// the last selection kept.
	SourceInvalidReason = "SourceInvalid"
	// RateLimitedReason: the server asked to wait (GitHub's rate limit);
	// the next scan waits as long as it said.
	RateLimitedReason = "RateLimited"
	// NoMatchingVersionReason: no version of the source passes the
	// policy; the last selection is kept.
	NoMatchingVersionReason = "NoMatchingVersion"
	// InvalidPolicyReason: spec.policy or spec.filterTags cannot work as
	// written.
	InvalidPolicyReason = "InvalidPolicy"
	// ChecksumMismatchReason: an asset of the selected version does not
	// have the hash its published checksum file names; the version is
	// refused and the last selection kept.
	ChecksumMismatchReason = "ChecksumMismatch"
	// AssetRefusedReason: an asset of the selected version could not be
	// pinned (larger than the bound, not found, a checksum file that names
	// no hash); the version is refused and the last selection kept.
	AssetRefusedReason = "AssetRefused"
)

// MaxAssets bounds spec.assets.
const MaxAssets = 32

// MaxSourceVersionsShown bounds status.lastScan.latestVersions.
const MaxSourceVersionsShown = 10

// ReleaseSourceSpec says where a ReleaseSource reads versions and which
// one it selects. Exactly one of helmRepository, githubReleases, gitTags
// and httpJSON is set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.helmRepository), has(self.githubReleases), has(self.gitTags), has(self.httpJSON)].filter(x, x).size() == 1",message="exactly one of helmRepository, githubReleases, gitTags and httpJSON must be set"
type ReleaseSourceSpec struct {
	// HelmRepository reads the versions of a chart from a classic Helm
	// repository's index.yaml.
	// +optional
	HelmRepository *HelmRepositorySource `json:"helmRepository,omitempty"`
	// GitHubReleases reads the releases of a GitHub (or GitHub Enterprise,
	// or Gitea) repository. Drafts are never read; prereleases only when
	// the policy is a semver range that admits prerelease versions.
	// +optional
	GitHubReleases *GitHubReleasesSource `json:"githubReleases,omitempty"`
	// GitTags reads the tags of a Git repository, by one listing of its
	// references (no clone).
	// +optional
	GitTags *GitTagsSource `json:"gitTags,omitempty"`
	// HTTPJSON reads versions out of a JSON document by a JSONPath
	// expression.
	// +optional
	HTTPJSON *HTTPJSONSource `json:"httpJSON,omitempty"`

	// Interval between two scans: at least 30s, as one scan may read an
	// answer of up to 32 MiB and writes the status.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="interval must be at least 30s"
	// +required
	Interval metav1.Duration `json:"interval"`
	// Timeout bounds one scan: at most 5m. Default 60s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m))+$"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('5m')",message="timeout must be at most 5m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// SecretRef names a Secret of the source's namespace with the
	// credentials for its server, in Flux's keys: username and password,
	// or bearerToken. They are sent to the source's own host only.
	// +optional
	SecretRef *meta.LocalObjectReference `json:"secretRef,omitempty"`
	// CertSecretRef names a Secret with ca.crt (a CA trusted besides the
	// system's) and optionally tls.crt and tls.key (a client certificate)
	// for the source's server. For gitTags only ca.crt is used.
	// +optional
	CertSecretRef *meta.LocalObjectReference `json:"certSecretRef,omitempty"`
	// Suspend stops further scans; the last selection stays.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Policy selects one version, by ImagePolicy's own rules.
	// +required
	Policy imagev1.ImagePolicyChoice `json:"policy"`
	// FilterTags keeps the versions that match a pattern, and may extract
	// the part to order by, as ImagePolicy's filterTags does.
	// +optional
	FilterTags *imagev1.TagFilter `json:"filterTags,omitempty"`

	// Assets are files of the selected version whose SHA-256 uprev pins:
	// each is downloaded once per selected version, hashed while it
	// streams (nothing is kept), and checked against its published
	// checksum file when there is one. A version whose asset cannot be
	// pinned is refused; the last selection stays.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Assets []AssetSpec `json:"assets,omitempty"`
}

// AssetSpec is one file of a release.
type AssetSpec struct {
	// Name of the asset, as markers name it (…:url:<name>,
	// …:sha256:<name>).
	// +kubebuilder:validation:Pattern="^[A-Za-z0-9][A-Za-z0-9._-]*$"
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
	// URL of the file, a Go template of the version:
	// https://dl.k8s.io/release/{{.Version}}/bin/linux/amd64/kubeadm.
	// +kubebuilder:validation:MinLength=1
	// +required
	URL string `json:"url"`
	// Checksum is the published checksum file of the asset.
	// +optional
	Checksum *AssetChecksum `json:"checksum,omitempty"`
}

// AssetChecksum is a published checksum file.
type AssetChecksum struct {
	// URL of the checksum file, a Go template of the version like the
	// asset's: a bare SHA-256 in hex, or sha256sum's lines (<hex>
	// <file name>), of which the line naming the asset's file is used.
	// +kubebuilder:validation:MinLength=1
	// +required
	URL string `json:"url"`
}

// HelmRepositorySource is a chart in a classic Helm repository.
type HelmRepositorySource struct {
	// URL of the repository: index.yaml is read at <url>/index.yaml.
	// +kubebuilder:validation:Pattern="^https?://"
	// +required
	URL string `json:"url"`
	// Chart is the chart's name in the index.
	// +kubebuilder:validation:MinLength=1
	// +required
	Chart string `json:"chart"`
}

// GitHubReleasesSource is the releases of one repository on GitHub or a
// server with GitHub's releases API.
type GitHubReleasesSource struct {
	// Repository is owner/name.
	// +kubebuilder:validation:Pattern="^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"
	// +required
	Repository string `json:"repository"`
	// URL is the API's base URL: https://api.github.com by default;
	// https://<host>/api/v3 for GitHub Enterprise Server,
	// https://<host>/api/v1 for Gitea.
	// +kubebuilder:validation:Pattern="^https?://"
	// +optional
	URL string `json:"url,omitempty"`
}

// GitTagsSource is the tags of a Git repository.
type GitTagsSource struct {
	// URL of the repository: https://, http:// or ssh://.
	// +kubebuilder:validation:Pattern="^(https?|ssh)://"
	// +required
	URL string `json:"url"`
}

// HTTPJSONSource is a JSON document that names versions, such as a release
// feed.
type HTTPJSONSource struct {
	// URL of the document.
	// +kubebuilder:validation:Pattern="^https?://"
	// +required
	URL string `json:"url"`
	// Versions is a JSONPath expression (kubectl's syntax, such as {.edge}
	// or {.releases[*].version}) naming the version strings in the
	// document. Only the subset without recursive descent (..), unions
	// ([a,b]) and range/end is accepted, so that an evaluation visits each
	// value of the document at most once per step (docs/sources.md).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	Versions string `json:"versions"`
	// Notes is a JSONPath expression, in the subset versions takes and as
	// a Go template of the version ({{.Version}}), naming the release
	// notes of that version in the document, such as
	// {.releases[?(@.version=="{{.Version}}")].notes}: a string, or a
	// list of strings (one line each). A pull request updating the source
	// shows the new version's notes, as untrusted text.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Notes string `json:"notes,omitempty"`
}

// ReleaseSourceStatus is what a ReleaseSource last found and selected.
type ReleaseSourceStatus struct {
	// ObservedGeneration is the last generation reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Reconciling, Stalled.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Latest is the selected version. It stays when a later scan fails or
	// selects nothing.
	// +optional
	Latest *SourceVersion `json:"latest,omitempty"`
	// ObservedPrevious is the version selected before Latest.
	// +optional
	ObservedPrevious *SourceVersion `json:"observedPrevious,omitempty"`
	// LastScan is the outcome of the last successful scan.
	// +optional
	LastScan *SourceScan `json:"lastScan,omitempty"`

	meta.ReconcileRequestStatus `json:",inline"`
}

// SourceVersion is one version of a source.
type SourceVersion struct {
	// Version is the version string as the source names it: a chart
	// version, a release's tag, a Git tag, a feed's value.
	Version string `json:"version"`
	// URL is where the version's artifact is, when the source says: the
	// chart archive of a Helm repository, the release page of GitHub.
	// +optional
	URL string `json:"url,omitempty"`
	// Digest is the artifact's digest, when the source publishes one, as
	// sha256:<hex>: the chart archive's digest from index.yaml.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Assets are the pinned files of the version (spec.assets).
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Assets []PinnedAsset `json:"assets,omitempty"`
}

// PinnedAsset is an asset of a version and its hash.
type PinnedAsset struct {
	// Name of the asset.
	Name string `json:"name"`
	// URL it was downloaded from.
	URL string `json:"url"`
	// SHA256 of its content, as sha256:<hex>.
	SHA256 string `json:"sha256"`
}

// SourceScan is the outcome of one scan.
type SourceScan struct {
	// Time the scan ended.
	Time metav1.Time `json:"time"`
	// VersionCount is how many versions the source listed.
	VersionCount int `json:"versionCount"`
	// Revision is a checksum of the version list; it changes when a
	// version is added or removed.
	Revision string `json:"revision"`
	// LatestVersions are the highest versions listed, in descending
	// order, at most 10.
	// +kubebuilder:validation:MaxItems=10
	// +optional
	LatestVersions []string `json:"latestVersions,omitempty"`
}

// ReleaseSource reads the versions of a release from where it is
// published (a Helm repository, GitHub releases, Git tags, a JSON feed)
// and selects one by ImagePolicy's rules.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Latest",type=string,JSONPath=`.status.latest.version`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ReleaseSource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ReleaseSourceSpec   `json:"spec,omitempty"`
	Status ReleaseSourceStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (in *ReleaseSource) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions.
func (in *ReleaseSource) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// ReleaseSourceList is a list of ReleaseSources.
//
// +kubebuilder:object:root=true
type ReleaseSourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReleaseSource `json:"items"`
}
