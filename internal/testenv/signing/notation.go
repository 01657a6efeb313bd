package signing

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/notaryproject/notation-core-go/testhelper"
	"github.com/notaryproject/notation-go"
	"github.com/notaryproject/notation-go/signer"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/uprev-dev/uprev/internal/signature"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// NotationCA is a certificate chain made for the test process (by
// notation-core-go's testhelper: a root CA and a code-signing leaf), as
// `notation sign` uses one.
type NotationCA struct {
	key   crypto.PrivateKey
	chain []*x509.Certificate
}

// NotationRSA is one test CA (RSA); NotationEC is another (ECDSA), which
// a trust store holding the first does not trust.
func NotationRSA() *NotationCA {
	leaf, root := testhelper.GetRSALeafCertificate(), testhelper.GetRSARootCertificate()
	return &NotationCA{key: leaf.PrivateKey, chain: []*x509.Certificate{leaf.Cert, root.Cert}}
}

// NotationEC is a test CA other than NotationRSA.
func NotationEC() *NotationCA {
	leaf, root := testhelper.GetECLeafCertificate(), testhelper.GetECRootCertificate()
	return &NotationCA{key: leaf.PrivateKey, chain: []*x509.Certificate{leaf.Cert, root.Cert}}
}

// RootPEM is the CA's root certificate, as a trust store holds it.
func (c *NotationCA) RootPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.chain[len(c.chain)-1].Raw})
}

// TrustPolicy is a trustpolicy.json that trusts the certificates of the
// store for every image, with signers named by trustedIdentities ("*" for
// any).
func TrustPolicy(trustedIdentities ...string) []byte {
	return fmt.Appendf(nil, `{"version":"1.0","trustPolicies":[{"name":"images","registryScopes":["*"],"signatureVerification":{"level":"strict"},"trustStores":["ca:uprev"],"trustedIdentities":%s}]}`, mustJSON(trustedIdentities))
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// Sign signs repo@digest with the CA's leaf as `notation sign` does: a JWS
// envelope in a referrer of the image (artifactType
// application/vnd.cncf.notary.signature).
func (c *NotationCA) Sign(t testing.TB, reg *registry.Registry, repo, imageDigest string) {
	t.Helper()
	s, err := signer.NewGenericSigner(c.key, c.chain)
	if err != nil {
		t.Fatalf("making a notation signer: %v", err)
	}
	subject, err := reg.Get(repo, imageDigest)
	if err != nil {
		t.Fatalf("reading the image to sign: %v", err)
	}
	desc := ocispec.Descriptor{MediaType: string(subject.MediaType), Digest: digest.Digest(subject.Digest.String()), Size: subject.Size}
	const envelopeType = "application/jose+json"
	sig, _, err := s.Sign(t.Context(), desc, notation.SignerSignOptions{SignatureMediaType: envelopeType})
	if err != nil {
		t.Fatalf("signing with notation: %v", err)
	}
	thumbprints := make([]string, 0, len(c.chain))
	for _, cert := range c.chain {
		sum := sha256.Sum256(cert.Raw)
		thumbprints = append(thumbprints, hex.EncodeToString(sum[:]))
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	// The in-process registry reports a referrer's artifactType from its
	// config media type.
	img = mutate.ConfigMediaType(img, signature.NotationArtifactType)
	img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(sig, envelopeType)})
	if err != nil {
		t.Fatalf("adding a signature layer: %v", err)
	}
	img = mutate.Annotations(img, map[string]string{"io.cncf.notary.x509chain.thumbprint#S256": string(mustJSON(thumbprints))}).(v1.Image)
	reg.PushReferrer(t, repo, mutate.Subject(img, subject.Descriptor).(v1.Image))
}
