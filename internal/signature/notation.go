package signature

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/notaryproject/notation-go"
	"github.com/notaryproject/notation-go/verifier"
	"github.com/notaryproject/notation-go/verifier/trustpolicy"
	"github.com/notaryproject/notation-go/verifier/truststore"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// NotationArtifactType is the artifactType of a Notary Project signature
// referrer.
const NotationArtifactType = "application/vnd.cncf.notary.signature"

// TrustPolicyKey is the entry of a notation Secret holding the trust
// policy, as in Flux.
const TrustPolicyKey = "trustpolicy.json"

// notationPolicy verifies Notary Project signatures with notation-go: the
// trust policy of the Secret, whose named trust stores all hold the
// certificates of the Secret.
type notationPolicy struct {
	verifier    notation.Verifier
	fingerprint string
}

func compileNotation(spec Spec) (Policy, error) {
	raw, ok := spec.Keys[TrustPolicyKey]
	if !ok {
		return nil, fmt.Errorf("%w: notation needs a secretRef with %s and the trust store's certificates", ErrInvalidSpec, TrustPolicyKey)
	}
	var doc trustpolicy.Document
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidSpec, TrustPolicyKey, err)
	}
	fp := sha256.New() // a hash: its writes never fail
	_, _ = fmt.Fprintf(fp, "notation\n%x\n", sha256.Sum256(raw))
	names := make([]string, 0, len(spec.Keys))
	for name := range spec.Keys {
		if strings.HasSuffix(name, ".crt") || strings.HasSuffix(name, ".pem") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var store certStore
	for _, name := range names {
		certs, err := cryptoutils.UnmarshalCertificatesFromPEM(spec.Keys[name])
		if err != nil || len(certs) == 0 {
			return nil, fmt.Errorf("%w: certificate %s does not parse", ErrInvalidSpec, name)
		}
		store = append(store, certs...)
		_, _ = fmt.Fprintf(fp, "cert %s %x\n", name, sha256.Sum256(spec.Keys[name]))
	}
	if len(store) == 0 {
		return nil, fmt.Errorf("%w: the secret has no certificate (an entry named *.crt or *.pem)", ErrInvalidSpec)
	}
	v, err := verifier.New(&doc, store, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidSpec, TrustPolicyKey, err)
	}
	return &notationPolicy{verifier: v, fingerprint: hex.EncodeToString(fp.Sum(nil))}, nil
}

// certStore is a trust store whose every named store holds the same
// certificates: those of the Secret.
type certStore []*x509.Certificate

// GetCertificates implements truststore.X509TrustStore.
func (s certStore) GetCertificates(context.Context, truststore.Type, string) ([]*x509.Certificate, error) {
	return s, nil
}

func (p *notationPolicy) Fingerprint() string { return p.fingerprint }

func (p *notationPolicy) verify(ctx context.Context, reg Registry, image, digest string) (Verdict, error) {
	repo := &notationRepository{reg: reg, image: image}
	_, outcomes, err := notation.Verify(ctx, p.verifier, repo, notation.VerifyOptions{
		ArtifactReference:    image + "@" + digest,
		MaxSignatureAttempts: MaxSignatures,
	})
	var noPolicy notation.NoApplicableTrustPolicyError
	var retrieval notation.SignatureRetrievalFailedError
	var failed notation.VerificationFailedError
	switch {
	case err == nil:
		return Verdict{Verified: true, SignedBy: notationSigner(outcomes)}, nil
	case repo.err != nil:
		// The registry failed: no verdict.
		return Verdict{}, repo.err
	case errors.As(err, &noPolicy):
		return Verdict{}, fmt.Errorf("%w: %s: %w", ErrInvalidSpec, TrustPolicyKey, err)
	case errors.As(err, &retrieval):
		return Verdict{Reason: Unsigned, Detail: fmt.Sprintf("no notation signature of %s among its referrers", digest)}, nil
	case errors.As(err, &failed) && strings.Contains(err.Error(), "trusted identities"):
		return Verdict{Reason: IdentityMismatch, Detail: err.Error()}, nil
	case errors.As(err, &failed):
		return Verdict{Reason: UntrustedChain, Detail: err.Error()}, nil
	default:
		return Verdict{}, fmt.Errorf("verifying the notation signatures of %s@%s: %w", image, digest, err)
	}
}

// notationRepository is notation-go's registry.Repository, read-only, on
// the Registry of the ImageRepository. It keeps the first registry error,
// which notation-go would otherwise turn into a string.
type notationRepository struct {
	reg   Registry
	image string
	err   error
}

func (r *notationRepository) fail(err error) error {
	if r.err == nil {
		r.err = err
	}
	return err
}

// Resolve implements registry.Repository.
func (r *notationRepository) Resolve(ctx context.Context, reference string) (ocispec.Descriptor, error) {
	desc, err := r.reg.Describe(ctx, r.image, reference)
	if err != nil {
		return ocispec.Descriptor{}, r.fail(err)
	}
	return ociDescriptor(desc), nil
}

// ListSignatures implements registry.Repository.
func (r *notationRepository) ListSignatures(ctx context.Context, desc ocispec.Descriptor, fn func([]ocispec.Descriptor) error) error {
	descs, err := r.reg.Referrers(ctx, r.image, desc.Digest.String(), NotationArtifactType)
	if err != nil {
		return r.fail(err)
	}
	out := make([]ocispec.Descriptor, 0, len(descs))
	for _, d := range descs {
		out = append(out, ociDescriptor(d))
	}
	return fn(out)
}

// FetchSignatureBlob implements registry.Repository: the one layer of a
// signature manifest, at most MaxSignatureBytes.
func (r *notationRepository) FetchSignatureBlob(ctx context.Context, desc ocispec.Descriptor) ([]byte, ocispec.Descriptor, error) {
	var blob []byte
	var blobDesc ocispec.Descriptor
	err := r.reg.ReadArtifact(ctx, r.image, desc.Digest.String(), func(img v1.Image) error {
		manifest, err := img.Manifest()
		if err != nil {
			return err
		}
		if len(manifest.Layers) != 1 {
			return fmt.Errorf("signature manifest %s has %d layers, not 1", desc.Digest, len(manifest.Layers))
		}
		if blob, err = readBlob(img, manifest.Layers[0]); err != nil {
			return err
		}
		blobDesc = ociDescriptor(manifest.Layers[0])
		return nil
	})
	if err != nil {
		return nil, ocispec.Descriptor{}, r.fail(err)
	}
	return blob, blobDesc, nil
}

// PushSignature implements registry.Repository: verification never
// writes.
func (r *notationRepository) PushSignature(context.Context, string, []byte, ocispec.Descriptor, map[string]string) (ocispec.Descriptor, ocispec.Descriptor, error) {
	return ocispec.Descriptor{}, ocispec.Descriptor{}, errors.New("verification does not push signatures")
}

// ociDescriptor converts a go-containerregistry descriptor.
func ociDescriptor(d v1.Descriptor) ocispec.Descriptor {
	return ocispec.Descriptor{
		MediaType:    string(d.MediaType),
		Digest:       digest.Digest(d.Digest.String()),
		Size:         d.Size,
		Annotations:  d.Annotations,
		ArtifactType: d.ArtifactType,
	}
}

// notationSigner names the subject of the certificate that signed the
// verified signature.
func notationSigner(outcomes []*notation.VerificationOutcome) string {
	for _, o := range outcomes {
		if o == nil || o.Error != nil || o.EnvelopeContent == nil || len(o.EnvelopeContent.SignerInfo.CertificateChain) == 0 {
			continue
		}
		return "certificate " + o.EnvelopeContent.SignerInfo.CertificateChain[0].Subject.String()
	}
	return "notation"
}
