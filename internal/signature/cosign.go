package signature

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigsig "github.com/sigstore/sigstore/pkg/signature"
)

// publicGoodTrustedRoot is public Sigstore's trusted root (Fulcio CAs,
// Rekor and CT log keys, timestamp authorities), as sigstore-go v1.3.0
// ships it. A Spec's TrustedRoot replaces it, for a private Sigstore or a
// newer public one.
//
//go:embed public_good_trusted_root.json
var publicGoodTrustedRoot []byte

// Bounds on what is read from a registry per digest.
const (
	// MaxSignatures is the most signatures read per layout: layers of the
	// .sig manifest, and referrer bundles.
	MaxSignatures = 16
	// MaxSignatureBytes bounds one payload or bundle.
	MaxSignatureBytes = 1 << 20
	// maxKeys bounds the public keys of a Spec.
	maxKeys = 32
)

// Media types and annotations of cosign's layouts.
const (
	// BundleArtifactType is the artifactType of a referrer that holds a
	// Sigstore bundle (cosign 3).
	BundleArtifactType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// SimpleSigningMediaType is the layer media type of a cosign 2
	// signature payload.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds the base64 signature of a cosign 2 layer.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
	// CertificateAnnotation holds the PEM signing certificate of a keyless
	// cosign 2 layer.
	CertificateAnnotation = "dev.sigstore.cosign/certificate"
	// RekorBundleAnnotation holds the Rekor entry of a cosign 2 layer.
	RekorBundleAnnotation = "dev.sigstore.cosign/bundle"
)

// SignatureTag is the tag where cosign 2 stores the signatures of digest:
// sha256:abc… → sha256-abc….sig.
func SignatureTag(digest string) string {
	return strings.Replace(digest, ":", "-", 1) + ".sig"
}

// cosignPolicy verifies cosign signatures with keys or keyless.
type cosignPolicy struct {
	// keys verify key signatures, one verifier per key; nil when keyless.
	keys []*verify.Verifier
	// keyNames name keys, index for index: their entries in the Secret.
	keyNames []string
	// keyless verifies certificates against the trusted root.
	keyless *verify.Verifier
	// identities are the keyless identities, any of which may match.
	identities  []verify.CertificateIdentity
	fingerprint string
}

func compileCosign(spec Spec) (Policy, error) {
	p := &cosignPolicy{}
	fp := sha256.New() // a hash: its writes never fail
	_, _ = fmt.Fprintf(fp, "cosign\n")
	if spec.Keys != nil {
		names := make([]string, 0, len(spec.Keys))
		for name := range spec.Keys {
			if strings.HasSuffix(name, ".pub") {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		if len(names) == 0 {
			return nil, fmt.Errorf("%w: the secret has no public key (an entry named *.pub)", ErrInvalidSpec)
		}
		if len(names) > maxKeys {
			return nil, fmt.Errorf("%w: the secret has %d public keys, more than %d", ErrInvalidSpec, len(names), maxKeys)
		}
		for _, name := range names {
			v, err := keyVerifier(spec.Keys[name])
			if err != nil {
				return nil, fmt.Errorf("%w: public key %s: %w", ErrInvalidSpec, name, err)
			}
			p.keys = append(p.keys, v)
			p.keyNames = append(p.keyNames, name)
			_, _ = fmt.Fprintf(fp, "key %s %x\n", name, sha256.Sum256(spec.Keys[name]))
		}
		p.fingerprint = hex.EncodeToString(fp.Sum(nil))
		return p, nil
	}
	if len(spec.Identities) == 0 {
		return nil, fmt.Errorf("%w: keyless verification needs matchOIDCIdentity, or a secretRef with public keys", ErrInvalidSpec)
	}
	for i, id := range spec.Identities {
		for field, expr := range map[string]string{"issuer": id.Issuer, "subject": id.Subject} {
			if expr == "" {
				return nil, fmt.Errorf("%w: matchOIDCIdentity[%d].%s is empty", ErrInvalidSpec, i, field)
			}
			if _, err := regexp.Compile(expr); err != nil {
				return nil, fmt.Errorf("%w: matchOIDCIdentity[%d].%s: %w", ErrInvalidSpec, i, field, err)
			}
		}
		ci, err := verify.NewShortCertificateIdentity("", id.Issuer, "", id.Subject)
		if err != nil {
			return nil, fmt.Errorf("%w: matchOIDCIdentity[%d]: %w", ErrInvalidSpec, i, err)
		}
		p.identities = append(p.identities, ci)
		_, _ = fmt.Fprintf(fp, "identity %q %q\n", id.Issuer, id.Subject)
	}
	rootJSON := spec.TrustedRoot
	if rootJSON == nil {
		rootJSON = publicGoodTrustedRoot
	}
	trusted, err := root.NewTrustedRootFromJSON(rootJSON)
	if err != nil {
		return nil, fmt.Errorf("%w: trusted_root.json: %w", ErrInvalidSpec, err)
	}
	_, _ = fmt.Fprintf(fp, "root %x\n", sha256.Sum256(rootJSON))
	// A keyless signature must be logged in the root's transparency log,
	// and its certificate must have been valid when it was logged.
	if p.keyless, err = verify.NewVerifier(trusted, verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1)); err != nil {
		return nil, fmt.Errorf("%w: trusted_root.json: %w", ErrInvalidSpec, err)
	}
	p.fingerprint = hex.EncodeToString(fp.Sum(nil))
	return p, nil
}

// keyVerifier returns a verifier that accepts signatures of the PEM public
// key pem only; the key is valid at any time.
func keyVerifier(pem []byte) (*verify.Verifier, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pem)
	if err != nil {
		return nil, err
	}
	sv, err := sigsig.LoadDefaultVerifier(pub)
	if err != nil {
		return nil, err
	}
	key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
	material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
	return verify.NewVerifier(material, verify.WithCurrentTime())
}

func (p *cosignPolicy) Fingerprint() string { return p.fingerprint }

// verify reads the signatures of image@digest in both layouts and accepts
// the first that verifies; otherwise the refusal names the most telling
// failure.
func (p *cosignPolicy) verify(ctx context.Context, reg Registry, image, digest string) (Verdict, error) {
	hash, err := v1.NewHash(digest)
	if err != nil {
		return Verdict{}, fmt.Errorf("%w: digest %q: %w", ErrInvalidSpec, digest, err)
	}
	entities, err := tagSignatures(ctx, reg, image, hash)
	if err != nil {
		return Verdict{}, err
	}
	bundles, err := referrerBundles(ctx, reg, image, hash, nil)
	if err != nil {
		return Verdict{}, err
	}
	entities = append(entities, bundles...)
	refusal := Verdict{Reason: Unsigned, Detail: fmt.Sprintf("no cosign signature of %s, neither at tag %s nor among its referrers", digest, SignatureTag(digest))}
	for _, e := range entities {
		v := p.verifyEntity(e)
		if v.Verified {
			return v, nil
		}
		if rank(v.Reason) > rank(refusal.Reason) {
			refusal = v
		}
	}
	return refusal, nil
}

// rank orders refusal reasons by how much they tell a person: a
// signature that only names another identity says more than none at all.
func rank(r Reason) int {
	return slices.Index([]Reason{Unsigned, UntrustedChain, WrongKey, IdentityMismatch}, r)
}

// signedEntity is one signature found in a registry, with what it signs.
type signedEntity struct {
	entity verify.SignedEntity
	// artifact gives the policy's artifact: the payload (cosign 2) or the
	// image digest a bundle's statement must name (cosign 3); a new one
	// for each attempt, as a payload is read as it is verified.
	artifact func() verify.ArtifactPolicyOption
	// keyless tells a certificate signature from a key signature.
	keyless bool
	// where names it for a person: the layer or referrer.
	where string
}

// namesDigest returns the artifact policy of a statement that must name
// digest among its subjects (a DSSE envelope's), for signedEntity.
func namesDigest(digest v1.Hash) (func() verify.ArtifactPolicyOption, error) {
	want, err := hex.DecodeString(digest.Hex)
	if err != nil {
		return nil, fmt.Errorf("%w: digest %s: %w", ErrInvalidSpec, digest, err)
	}
	return func() verify.ArtifactPolicyOption { return verify.WithArtifactDigest(digest.Algorithm, want) }, nil
}

func (p *cosignPolicy) verifyEntity(e signedEntity) Verdict {
	if p.keys != nil {
		var lastErr error
		for i, k := range p.keys {
			_, err := k.Verify(e.entity, verify.NewPolicy(e.artifact(), verify.WithKey()))
			if err == nil {
				return Verdict{Verified: true, SignedBy: "key " + p.keyNames[i]}
			}
			lastErr = err
		}
		return Verdict{Reason: WrongKey, Detail: fmt.Sprintf("%s is not signed by a key of the secret: %v", e.where, lastErr)}
	}
	if !e.keyless {
		return Verdict{Reason: UntrustedChain, Detail: fmt.Sprintf("%s is signed by a key, not by a certificate of the trusted root", e.where)}
	}
	opts := make([]verify.PolicyOption, 0, len(p.identities))
	for _, id := range p.identities {
		opts = append(opts, verify.WithCertificateIdentity(id))
	}
	res, err := p.keyless.Verify(e.entity, verify.NewPolicy(e.artifact(), opts...))
	var mismatch *verify.ErrNoMatchingCertificateIdentity
	switch {
	case err == nil:
		return Verdict{Verified: true, SignedBy: keylessSigner(res)}
	case errors.As(err, &mismatch):
		return Verdict{Reason: IdentityMismatch, Detail: fmt.Sprintf("%s: %v", e.where, err)}
	default:
		return Verdict{Reason: UntrustedChain, Detail: fmt.Sprintf("%s: %v", e.where, err)}
	}
}

// keylessSigner names the identity and issuer of the certificate a
// keyless signature was verified with.
func keylessSigner(res *verify.VerificationResult) string {
	if res == nil || res.Signature == nil || res.Signature.Certificate == nil {
		return "keyless"
	}
	c := res.Signature.Certificate
	return fmt.Sprintf("keyless identity %s, issuer %s", c.SubjectAlternativeName, c.Issuer)
}
