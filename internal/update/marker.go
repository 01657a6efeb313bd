package update

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MarkerToken is the key of a setter marker's JSON object; a file that
// contains neither it nor SourceMarkerToken is never parsed.
const MarkerToken = "$imagepolicy"

// SourceMarkerToken is the key of a ReleaseSource marker's JSON object:
// {"$uprev": "<namespace>:<source>"} sets the selected version,
// …:url:<asset> and …:sha256:<asset> an asset's URL and hash.
const SourceMarkerToken = "$uprev"

// MarkerTokens returns the tokens a file with a marker holds, one at least:
// MarkerToken and SourceMarkerToken.
func MarkerTokens() []string {
	return []string{MarkerToken, SourceMarkerToken}
}

// mentionsMarker reports whether text mentions a marker token.
func mentionsMarker(text []byte) bool {
	for _, token := range MarkerTokens() {
		if bytes.Contains(text, []byte(token)) {
			return true
		}
	}
	return false
}

// ErrNoMarker is returned by ParseMarker for a comment that does not mention
// MarkerToken at all, i.e. an ordinary comment.
var ErrNoMarker = errors.New("comment is not an image policy marker")

// ErrInvalidMarker is wrapped by every error about a comment that mentions
// MarkerToken but is not a valid marker, or that sits where no value can be
// set. It is a configuration error: retrying does not help.
var ErrInvalidMarker = errors.New("invalid image policy marker")

// MarkerKind says which part of a policy's latest reference a marker sets.
type MarkerKind string

const (
	// KindImage sets the whole reference: name:tag, or name:tag@digest when
	// the policy reports a digest.
	KindImage MarkerKind = "image"
	// KindName sets the image name without tag or digest (suffix :name).
	KindName MarkerKind = "name"
	// KindTag sets the tag alone (suffix :tag); also used for a chart's
	// version field.
	KindTag MarkerKind = "tag"
	// KindDigest sets the digest alone, as sha256:<hex> (suffix :digest).
	KindDigest MarkerKind = "digest"
	// KindVersion sets a ReleaseSource's selected version
	// ({"$uprev": "<namespace>:<source>"}).
	KindVersion MarkerKind = "version"
	// KindAssetURL sets the URL of a ReleaseSource's asset (suffix
	// :url:<asset>).
	KindAssetURL MarkerKind = "url"
	// KindAssetSHA256 sets the hash of a ReleaseSource's asset, as
	// sha256:<hex> (suffix :sha256:<asset>).
	KindAssetSHA256 MarkerKind = "sha256"
)

// SourceKind is the Kind of the PolicyKey of a ReleaseSource.
const SourceKind = "ReleaseSource"

// PolicyKey names an ImagePolicy, or a ReleaseSource.
type PolicyKey struct {
	// Namespace is the policy's namespace.
	Namespace string
	// Name is the policy's name.
	Name string
	// Kind is SourceKind for a ReleaseSource, empty for an ImagePolicy.
	Kind string
}

// String returns the key as namespace/name, and a ReleaseSource's as
// ReleaseSource/namespace/name (ParsePolicyKey reads both).
func (k PolicyKey) String() string {
	if k.Kind != "" {
		return k.Kind + "/" + k.Namespace + "/" + k.Name
	}
	return k.Namespace + "/" + k.Name
}

// ParsePolicyKey parses what PolicyKey.String returns.
func ParsePolicyKey(s string) PolicyKey {
	if rest, ok := strings.CutPrefix(s, SourceKind+"/"); ok {
		ns, name, _ := strings.Cut(rest, "/")
		return PolicyKey{Namespace: ns, Name: name, Kind: SourceKind}
	}
	ns, name, _ := strings.Cut(s, "/")
	return PolicyKey{Namespace: ns, Name: name}
}

// AssetKey names one value of a ReleaseSource's asset: its URL
// (KindAssetURL) or its hash (KindAssetSHA256).
type AssetKey struct {
	// Source is the ReleaseSource.
	Source PolicyKey
	// Kind is KindAssetURL or KindAssetSHA256.
	Kind MarkerKind
	// Asset is the asset's name.
	Asset string
}

// Ref is a policy's latest reference, as reported in its status.latestRef.
type Ref struct {
	// Image is the image (or chart) name without tag or digest.
	Image string
	// Tag is the selected tag.
	Tag string
	// Digest is the selected tag's digest (sha256:<hex>), empty when the
	// policy does not report one.
	Digest string
}

// String returns the reference as name:tag, with @digest appended when the
// digest is known; this is the value a bare marker writes.
func (r Ref) String() string {
	s := r.Image + ":" + r.Tag
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Value returns what a marker of the given kind writes for this reference.
func (r Ref) Value(kind MarkerKind) string {
	switch kind {
	case KindName:
		return r.Image
	case KindTag:
		return r.Tag
	case KindDigest:
		return r.Digest
	case KindVersion:
		return r.Tag
	default:
		return r.String()
	}
}

// ParseRef splits an image reference of the form name[:tag][@digest]. A
// colon counts as the tag separator only after the last slash, so a
// registry port (localhost:5000/app) stays part of the name.
func ParseRef(s string) Ref {
	var r Ref
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s, r.Digest = s[:i], s[i+1:]
	}
	if i := strings.LastIndexByte(s, ':'); i > strings.LastIndexByte(s, '/') {
		s, r.Tag = s[:i], s[i+1:]
	}
	r.Image = s
	return r
}

// Marker is a parsed setter marker.
type Marker struct {
	// Policy is the ImagePolicy (or ReleaseSource) the marker follows.
	Policy PolicyKey
	// Kind is the part of the policy's reference the marker sets.
	Kind MarkerKind
	// Asset is the asset's name, for KindAssetURL and KindAssetSHA256.
	Asset string
}

// String returns the marker's value in Flux's namespace:name[:suffix] form,
// or a ReleaseSource marker's namespace:name[:url|sha256:asset].
func (m Marker) String() string {
	s := m.Policy.Namespace + ":" + m.Policy.Name
	switch {
	case m.Asset != "":
		s += ":" + string(m.Kind) + ":" + m.Asset
	case m.Kind != KindImage && m.Kind != KindVersion:
		s += ":" + string(m.Kind)
	}
	return s
}

// ParseMarker parses a YAML line comment such as
// `# {"$imagepolicy": "flux-system:podinfo:tag"}`; the leading '#' is
// optional. The comment must be a JSON object whose "$imagepolicy" member
// is a string of the form namespace:name, namespace:name:suffix (suffix one
// of name, tag, digest) or, when defaultNamespace is not empty, a bare name.
// As in Flux, a value with one colon is always namespace:name, so a suffix
// needs the namespace spelled out.
//
// A comment that does not contain MarkerToken returns ErrNoMarker; one that
// does but is not a valid marker returns an error wrapping ErrInvalidMarker.
//
// A comment with SourceMarkerToken instead ({"$uprev": ...}) is a
// ReleaseSource marker: namespace:name (or a bare name, as above) sets the
// version, namespace:name:url:asset and namespace:name:sha256:asset an
// asset's URL and hash.
func ParseMarker(comment, defaultNamespace string) (Marker, error) {
	if !mentionsMarker([]byte(comment)) {
		return Marker{}, ErrNoMarker
	}
	text := strings.TrimSpace(strings.TrimLeft(comment, "#"))
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &fields); err != nil {
		return Marker{}, fmt.Errorf("%w: %s is not a JSON object: %v", ErrInvalidMarker, text, err)
	}
	rawImage, image := fields[MarkerToken]
	rawSource, source := fields[SourceMarkerToken]
	token, raw := MarkerToken, rawImage
	switch {
	case image && source:
		return Marker{}, fmt.Errorf("%w: %s has both %q and %q", ErrInvalidMarker, text, MarkerToken, SourceMarkerToken)
	case source:
		token, raw = SourceMarkerToken, rawSource
	case !image:
		return Marker{}, fmt.Errorf("%w: %s has no %q member", ErrInvalidMarker, text, MarkerToken)
	}
	var setter string
	if err := json.Unmarshal(raw, &setter); err != nil {
		return Marker{}, fmt.Errorf("%w: %q must be a string, got %s", ErrInvalidMarker, token, raw)
	}
	if source {
		return parseSourceSetter(setter, defaultNamespace)
	}
	return parseSetter(setter, defaultNamespace)
}

// parseSourceSetter parses the namespace:name[:url|sha256:asset] string of
// a ReleaseSource marker.
func parseSourceSetter(setter, defaultNamespace string) (Marker, error) {
	parts := strings.Split(setter, ":")
	m := Marker{Kind: KindVersion}
	switch len(parts) {
	case 1, 2:
		image, err := parseSetter(setter, defaultNamespace)
		if err != nil {
			return Marker{}, err
		}
		m.Policy = image.Policy
	case 4:
		image, err := parseSetter(parts[0]+":"+parts[1], defaultNamespace)
		if err != nil {
			return Marker{}, err
		}
		m.Policy = image.Policy
		switch kind := MarkerKind(parts[2]); kind {
		case KindAssetURL, KindAssetSHA256:
			m.Kind = kind
		default:
			return Marker{}, fmt.Errorf("%w: %q has unknown suffix %q (want url or sha256)", ErrInvalidMarker, setter, parts[2])
		}
		if !isAssetName(parts[3]) {
			return Marker{}, fmt.Errorf("%w: %q: asset name %q is not a valid asset name", ErrInvalidMarker, setter, parts[3])
		}
		m.Asset = parts[3]
	default:
		return Marker{}, fmt.Errorf("%w: %q is not namespace:source, namespace:source:url:<asset> or namespace:source:sha256:<asset>", ErrInvalidMarker, setter)
	}
	m.Policy.Kind = SourceKind
	return m, nil
}

// isAssetName reports whether s is a valid name of a ReleaseSource asset:
// letters, digits, '.', '_' and '-', starting with a letter or digit, at
// most 63 characters.
func isAssetName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || (r != '.' && r != '_' && r != '-')) {
			return false
		}
	}
	return true
}

// parseSetter parses the namespace:name[:suffix] string of a marker.
func parseSetter(setter, defaultNamespace string) (Marker, error) {
	parts := strings.Split(setter, ":")
	m := Marker{Kind: KindImage}
	switch len(parts) {
	case 1:
		if defaultNamespace == "" {
			return Marker{}, fmt.Errorf("%w: %q has no namespace (want namespace:name)", ErrInvalidMarker, setter)
		}
		m.Policy = PolicyKey{Namespace: defaultNamespace, Name: parts[0]}
	case 2, 3:
		m.Policy = PolicyKey{Namespace: parts[0], Name: parts[1]}
		if len(parts) == 3 {
			switch kind := MarkerKind(parts[2]); kind {
			case KindName, KindTag, KindDigest:
				m.Kind = kind
			default:
				return Marker{}, fmt.Errorf("%w: %q has unknown suffix %q (want name, tag or digest)", ErrInvalidMarker, setter, parts[2])
			}
		}
	default:
		return Marker{}, fmt.Errorf("%w: %q has too many parts (want namespace:name[:suffix])", ErrInvalidMarker, setter)
	}
	if !isDNSLabel(m.Policy.Namespace, 63) {
		return Marker{}, fmt.Errorf("%w: %q: namespace %q is not a valid namespace name", ErrInvalidMarker, setter, m.Policy.Namespace)
	}
	if !isDNSSubdomain(m.Policy.Name) {
		return Marker{}, fmt.Errorf("%w: %q: policy name %q is not a valid object name", ErrInvalidMarker, setter, m.Policy.Name)
	}
	return m, nil
}

// isDNSSubdomain reports whether s is a valid Kubernetes object name (RFC 1123
// subdomain): dot-separated labels, at most 253 characters.
func isDNSSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if !isDNSLabel(label, 63) {
			return false
		}
	}
	return true
}

// isDNSLabel reports whether s is an RFC 1123 label of at most maxLen
// characters: lower-case alphanumerics and '-', starting and ending with an
// alphanumeric.
func isDNSLabel(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
