// Package signature decides whether an image, named by its digest, carries
// a signature that a verification spec (ReleaseGate spec.verify) accepts,
// before any version of it is written to Git.
//
// Notary Project signatures are read from the OCI referrers of the image
// and verified with notation-go against the trust policy and trust store
// of the spec.
//
// Cosign signatures are found in both layouts cosign writes: the
// sha256-<hex>.sig tag of cosign 2 (simple-signing payloads with the
// signature, and for keyless signing the certificate and Rekor bundle, in
// layer annotations) and the OCI referrers of cosign 3 (Sigstore bundles
// whose subject is the image). Both are verified with sigstore-go: against
// the public keys of the spec, or, keyless, against a Fulcio certificate
// that chains to the trusted root (public Sigstore's unless one is given),
// is logged in its Rekor, and names one of the spec's OIDC identities.
//
// Verdicts are cached per image digest and spec (see Verifier), so a scan
// that finds nothing new makes no registry request for versions already
// judged.
//
// The package knows nothing of Kubernetes: the caller reads the Secrets
// and passes their data, and passes a registry client built with the
// ImageRepository's credentials.
package signature

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/uprev-dev/uprev/internal/registry"
)

// Providers of a Spec.
const (
	// Cosign verifies cosign (Sigstore) signatures.
	Cosign = "cosign"
	// Notation verifies Notary Project signatures.
	Notation = "notation"
)

// Reason says why a version is refused, in the words a person reads in
// `uprev get gates`: "refused: unsigned".
type Reason string

// Reasons of a refusal.
const (
	// Unsigned: no signature for this digest in any layout.
	Unsigned Reason = "unsigned"
	// WrongKey: signatures exist, none made by a key of the spec.
	WrongKey Reason = "wrong key"
	// IdentityMismatch: a keyless signature chains to the trusted root,
	// but its certificate names no identity of the spec.
	IdentityMismatch Reason = "identity mismatch"
	// UntrustedChain: a keyless signature whose certificate does not chain
	// to the trusted root, or is not logged in its transparency log.
	UntrustedChain Reason = "untrusted chain"
)

// ErrInvalidSpec means the verification spec or its Secrets cannot be
// used (a key that does not parse, a bad regexp, an unknown provider);
// retrying without a change will not help.
var ErrInvalidSpec = errors.New("invalid signature verification spec")

// Verdict is the outcome of verifying one digest.
type Verdict struct {
	// Verified is true when a signature the spec accepts was found.
	Verified bool
	// Reason says why the digest was refused; empty when Verified.
	Reason Reason
	// Detail says more, for the ImagePolicy's message: which signature
	// failed and how. It names no secret.
	Detail string
	// SignedBy names, when Verified, what the accepted signature was
	// verified with: "key <entry of the Secret>", "keyless identity
	// <subject>, issuer <OIDC issuer>", or for notation the signing
	// certificate's subject. It names no secret.
	SignedBy string
}

// Identity is one OIDC identity a keyless certificate may name, as
// regular expressions.
type Identity struct {
	// Issuer matches the certificate's OIDC issuer.
	Issuer string
	// Subject matches the certificate's subject (SAN).
	Subject string
}

// Spec is what verification asks of a signature.
type Spec struct {
	// Provider is Cosign or Notation.
	Provider string
	// Keys is the data of the secretRef Secret: for cosign, public keys in
	// the entries whose name ends in .pub; for notation, the trust store's
	// certificates (entries ending in .crt or .pem) and trustpolicy.json.
	// Nil for keyless cosign.
	Keys map[string][]byte
	// Identities are the keyless identities accepted; keyless cosign needs
	// at least one.
	Identities []Identity
	// TrustedRoot is a Sigstore trusted_root.json; nil takes public
	// Sigstore's.
	TrustedRoot []byte
}

// Registry is the registry access verification needs: a client built with
// the ImageRepository's credentials (registry.Client).
type Registry interface {
	// ReadTagged reads the image manifest a tag of image names.
	ReadTagged(ctx context.Context, image, tag string, read func(v1.Image) error) error
	// Referrers lists the manifests whose subject is image@digest, of
	// artifactType when set.
	Referrers(ctx context.Context, image, digest, artifactType string) ([]v1.Descriptor, error)
	// Describe returns the descriptor of the manifest image:reference.
	Describe(ctx context.Context, image, reference string) (v1.Descriptor, error)
	// ReadArtifact reads the manifest image@digest.
	ReadArtifact(ctx context.Context, image, digest string, read func(v1.Image) error, opts ...registry.ArtifactOption) error
	// Timeout is how long one call may take. Every read of one digest's
	// signatures, and every read of its attestations, share one such
	// deadline (withReadDeadline).
	Timeout() time.Duration
}

// withReadDeadline bounds all the reads of one check of a digest together
// by one call's timeout of reg, so that a registry answering each of its
// many reads (a listing, 16 bundles, a tag and its layers) just within
// the timeout cannot stretch the check to their sum. done wraps an error
// of a read with what the deadline was, when it was the deadline that
// ended it.
func withReadDeadline(ctx context.Context, reg Registry, what string) (context.Context, func(error) error, context.CancelFunc) {
	timeout := reg.Timeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	done := func(err error) error {
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%s not read within %s: %w", what, timeout, err)
		}
		return err
	}
	return ctx, done, cancel
}

// Policy is a compiled Spec, ready to verify many digests.
type Policy interface {
	// Fingerprint identifies what the policy accepts (provider, keys,
	// identities, trusted root) for the verdict cache: a changed spec or
	// Secret gives a new fingerprint, so no old verdict applies to it.
	Fingerprint() string
	// verify judges image@digest, reading its signatures through reg.
	verify(ctx context.Context, reg Registry, image, digest string) (Verdict, error)
}

// Compile checks spec and prepares it for verification; the error wraps
// ErrInvalidSpec and names what is wrong, never a Secret's content.
func Compile(spec Spec) (Policy, error) {
	switch spec.Provider {
	case Cosign, "":
		return compileCosign(spec)
	case Notation:
		return compileNotation(spec)
	default:
		return nil, fmt.Errorf("%w: provider %q is not cosign or notation", ErrInvalidSpec, spec.Provider)
	}
}
