package plan

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/policy"
	"github.com/uprev-dev/uprev/internal/update"
)

// ErrInvalidRefs is wrapped by every error about the content of a refs file.
var ErrInvalidRefs = errors.New("invalid refs file")

// DefaultOrdering is the ordering of a refs file entry without a policy:
// semantic versions, prereleases included. Tags that are not semantic
// versions cannot be compared, so changes between them are never refused.
var DefaultOrdering = guard.Ordering{Policy: imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=0.0.0-0"}}}

// RefEntry is one policy in a refs file: the fields of an ImagePolicy's
// status.latestRef, and optionally the spec fields that order its versions.
type RefEntry struct {
	// Name is the image (or chart) name without tag or digest.
	Name string `json:"name"`
	// Tag is the selected tag.
	Tag string `json:"tag"`
	// Digest is the tag's digest (sha256:<hex>), if the policy reports one.
	Digest string `json:"digest,omitempty"`
	// Policy is the policy's spec.policy; without it versions are compared
	// as semantic versions (DefaultOrdering).
	Policy *imagev1.ImagePolicyChoice `json:"policy,omitempty"`
	// FilterTags is the policy's spec.filterTags.
	FilterTags *imagev1.TagFilter `json:"filterTags,omitempty"`
}

// ParseRefs reads a refs file: a YAML (or JSON) mapping of
// `namespace/name` to a RefEntry.
//
//	fleet/agent:
//	  name: ghcr.io/acme/agent
//	  tag: 1.4.2
//	  digest: sha256:…
//	  policy: {semver: {range: ">=1.0.0"}}
//
// Unknown fields, keys that are not namespace/name, entries without name or
// tag and invalid orderings are errors wrapping ErrInvalidRefs.
func ParseRefs(data []byte) (map[update.PolicyKey]guard.Policy, error) {
	var entries map[string]RefEntry
	if err := yaml.UnmarshalStrict(data, &entries); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRefs, err)
	}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	policies := make(map[update.PolicyKey]guard.Policy, len(entries))
	for _, k := range keys {
		e := entries[k]
		ns, name, ok := strings.Cut(k, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("%w: key %q: want namespace/name", ErrInvalidRefs, k)
		}
		if e.Name == "" || e.Tag == "" {
			return nil, fmt.Errorf("%w: %s: name and tag are required", ErrInvalidRefs, k)
		}
		ordering := DefaultOrdering
		if e.Policy != nil {
			ordering.Policy = *e.Policy
		}
		ordering.FilterTags = e.FilterTags
		if _, err := policy.NewSelector(ordering.Policy); err != nil {
			return nil, fmt.Errorf("%w: %s: policy: %w", ErrInvalidRefs, k, err)
		}
		if _, err := policy.NewFilter(ordering.FilterTags); err != nil {
			return nil, fmt.Errorf("%w: %s: filterTags: %w", ErrInvalidRefs, k, err)
		}
		policies[update.PolicyKey{Namespace: ns, Name: name}] = guard.Policy{
			Ref:      update.Ref{Image: e.Name, Tag: e.Tag, Digest: e.Digest},
			Ordering: &ordering,
		}
	}
	return policies, nil
}

// ReadRefsFile reads and parses the refs file at path; see ParseRefs.
func ReadRefsFile(path string) (map[update.PolicyKey]guard.Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading refs file: %w", err)
	}
	policies, err := ParseRefs(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return policies, nil
}
