package v1alpha1

import (
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GitSource says which Git repository and revision to read, and how to
// authenticate.
type GitSource struct {
	// URL of the repository: https://, http:// (in-house mirrors) or ssh://.
	// +kubebuilder:validation:Pattern="^(http|https|ssh)://.*$"
	// +required
	URL string `json:"url"`

	// SecretRef names a Secret in the object's namespace with the Git
	// credentials: `username` and `password`, `bearerToken`, or `identity`
	// (a private key) and `known_hosts`; `ca.crt` for a server with its own CA.
	// +optional
	SecretRef *meta.LocalObjectReference `json:"secretRef,omitempty"`

	// Ref is the branch, tag or commit to read. UpdateAutomation accepts only
	// a branch.
	// +required
	Ref GitRef `json:"ref"`

	// Timeout of each network operation with the repository (a clone, a
	// fetch, a push) and of the wait for another run using the same kept
	// clone, as Flux's GitRepository timeout. Default: 60s; at most 5m.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('5m')",message="timeout must be at most 5m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// GetTimeout returns spec.git.timeout, zero when it is not set (the
// default then applies).
func (s GitSource) GetTimeout() time.Duration {
	if s.Timeout == nil {
		return 0
	}
	return s.Timeout.Duration
}

// GitRef names one Git revision. When several fields are set, commit wins
// over tag, and tag over branch.
type GitRef struct {
	// Branch to check out.
	// +optional
	Branch string `json:"branch,omitempty"`

	// Tag to check out.
	// +optional
	Tag string `json:"tag,omitempty"`

	// Commit SHA to check out.
	// +optional
	Commit string `json:"commit,omitempty"`
}

// ReadsPush reports whether an object reading this ref has something new
// to read after a push of the full ref name pushed (refs/heads/main,
// refs/tags/v1.2.0): a branch after a push to it, a tag after any pushed
// tag (a tag may be created or moved), a commit never. A push that names
// no ref ("") may be of anything, so every ref reads it.
func (r GitRef) ReadsPush(pushed string) bool {
	switch {
	case pushed == "":
		return true
	case r.Commit != "":
		return false
	case r.Tag != "":
		return strings.HasPrefix(pushed, "refs/tags/")
	default:
		return pushed == "refs/heads/"+r.Branch
	}
}

// String returns the ref as written in a revision, such as `main` or `v1.2.0`.
func (r GitRef) String() string {
	switch {
	case r.Commit != "":
		return r.Commit
	case r.Tag != "":
		return r.Tag
	default:
		return r.Branch
	}
}
