// Package signing signs images in the in-process test registry the way
// cosign does, with keys and a Sigstore that the test makes: a cosign key
// pair (ECDSA P-256, as `cosign generate-key-pair`), and keyless
// signatures from sigstore-go's VirtualSigstore (a Fulcio CA, a Rekor log
// and a timestamp authority in process), in both layouts cosign writes:
// the sha256-<hex>.sig tag of cosign 2 and the OCI referrers bundle of
// cosign 3.
package signing

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/uprev-dev/uprev/internal/signature"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// Key is a cosign key pair made for one test.
type Key struct {
	priv *ecdsa.PrivateKey
}

// NewKey makes a key pair as `cosign generate-key-pair` does (ECDSA
// P-256).
func NewKey(t testing.TB) *Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generating a signing key: %v", err)
	}
	return &Key{priv: priv}
}

// PublicPEM is the public key as cosign.pub holds it.
func (k *Key) PublicPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		t.Fatalf("encoding a public key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func (k *Key) sign(t testing.TB, message []byte) []byte {
	t.Helper()
	sum := sha256.Sum256(message)
	sig, err := ecdsa.SignASN1(rand.Reader, k.priv, sum[:])
	if err != nil {
		t.Fatalf("signing: %v", err)
	}
	return sig
}

// Payload is the simple-signing payload cosign 2 signs for image@digest.
func Payload(image, digest string) []byte {
	return fmt.Appendf(nil, `{"critical":{"identity":{"docker-reference":%q},"image":{"docker-manifest-digest":%q},"type":"cosign container image signature"},"optional":null}`, image, digest)
}

// statement is the in-toto statement cosign 3 signs for image@digest.
func statement(image, digest string) []byte {
	return attestation(image, digest, "https://sigstore.dev/cosign/sign/v1", []byte("{}"))
}

// attestation is the in-toto statement of predicate, of predicateType,
// about image@digest.
func attestation(image, digest, predicateType string, predicate []byte) []byte {
	algorithm, hexDigest, _ := strings.Cut(digest, ":")
	return fmt.Appendf(nil, `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":%q,"digest":{%q:%q}}],"predicateType":%q,"predicate":%s}`, image, algorithm, hexDigest, predicateType, predicate)
}

// SignTag signs repo@digest with k in the cosign 2 layout: a layer of the
// manifest at tag sha256-<hex>.sig, added to the signatures already there.
func (k *Key) SignTag(t testing.TB, reg *registry.Registry, repo, digest string) {
	t.Helper()
	payload := Payload(reg.Image(repo), digest)
	pushTagSignature(t, reg, repo, digest, payload, map[string]string{
		signature.SignatureAnnotation: base64.StdEncoding.EncodeToString(k.sign(t, payload)),
	})
}

// SignBundle signs repo@digest with k in the cosign 3 layout: a Sigstore
// bundle (a DSSE envelope of an in-toto statement naming the digest)
// pushed as a referrer of the image.
func (k *Key) SignBundle(t testing.TB, reg *registry.Registry, repo, digest string) {
	t.Helper()
	k.SignBundleAttachedTo(t, reg, repo, digest, digest)
}

// SignBundleAttachedTo signs repo@signed with k in the cosign 3 layout but
// pushes the bundle as a referrer of repo@attachedTo, as someone copying a
// signature to another image would.
func (k *Key) SignBundleAttachedTo(t testing.TB, reg *registry.Registry, repo, signed, attachedTo string) {
	t.Helper()
	k.pushStatement(t, reg, repo, attachedTo, statement(reg.Image(repo), signed))
}

// Attest attests predicate, of predicateType, about repo@digest with k,
// as `cosign attest --key` does in the cosign 3 layout: a Sigstore bundle
// of a DSSE envelope, pushed as a referrer of the image. It returns the
// referrer's digest.
func (k *Key) Attest(t testing.TB, reg *registry.Registry, repo, digest, predicateType string, predicate []byte) string {
	t.Helper()
	return k.pushStatement(t, reg, repo, digest, attestation(reg.Image(repo), digest, predicateType, predicate))
}

// pushStatement signs the in-toto statement body with k and pushes its
// bundle as a referrer of repo@attachedTo.
func (k *Key) pushStatement(t testing.TB, reg *registry.Registry, repo, attachedTo string, body []byte) string {
	t.Helper()
	const payloadType = "application/vnd.in-toto+json"
	return k.pushSigned(t, reg, repo, attachedTo, payloadType, body, k.sign(t, dsse.PAE(payloadType, body)))
}

// pushSigned pushes the bundle of body with the DSSE signature sig by k
// as a referrer of repo@attachedTo.
func (k *Key) pushSigned(t testing.TB, reg *registry.Registry, repo, attachedTo, payloadType string, body, sig []byte) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		t.Fatalf("encoding a public key: %v", err)
	}
	hint := fmt.Sprintf("%x", sha256.Sum256(der))
	pb := &protobundle.Bundle{
		MediaType: signature.BundleArtifactType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{Hint: hint}},
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload: body, PayloadType: payloadType,
			Signatures: []*protodsse.Signature{{Sig: sig}},
		}},
	}
	return pushBundle(t, reg, repo, attachedTo, pb)
}

// Sigstore is a private Sigstore made for one test.
type Sigstore struct {
	vs *ca.VirtualSigstore
}

// NewSigstore starts a private Sigstore in process.
func NewSigstore(t testing.TB) *Sigstore {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatalf("making a virtual Sigstore: %v", err)
	}
	return &Sigstore{vs: vs}
}

// TrustedRoot is the trusted_root.json of s, as a trustedRootSecretRef
// Secret holds it.
func (s *Sigstore) TrustedRoot(t testing.TB) []byte {
	t.Helper()
	// VirtualSigstore names its logs by the hex of their key ID where a
	// trusted root holds the key ID itself.
	logs := func(in map[string]*root.TransparencyLog) map[string]*root.TransparencyLog {
		out := make(map[string]*root.TransparencyLog, len(in))
		for id, l := range in {
			raw, err := hex.DecodeString(id)
			if err != nil {
				t.Fatalf("decoding the log ID %s: %v", id, err)
			}
			c := *l
			c.ID = raw
			out[id] = &c
		}
		return out
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, s.vs.FulcioCertificateAuthorities(), logs(s.vs.CTLogs()), s.vs.TimestampingAuthorities(), logs(s.vs.RekorLogs()))
	if err != nil {
		t.Fatalf("making a trusted root: %v", err)
	}
	data, err := tr.MarshalJSON()
	if err != nil {
		t.Fatalf("encoding a trusted root: %v", err)
	}
	return data
}

// SignTag signs repo@digest keyless, with a certificate for subject and
// issuer, in the cosign 2 layout: signature, certificate and Rekor bundle
// in the annotations of a layer at tag sha256-<hex>.sig.
func (s *Sigstore) SignTag(t testing.TB, reg *registry.Registry, repo, digest, subject, issuer string) {
	t.Helper()
	payload := Payload(reg.Image(repo), digest)
	e, err := s.vs.Sign(subject, issuer, payload)
	if err != nil {
		t.Fatalf("signing keyless: %v", err)
	}
	certificate, sc, rekorBundle := s.tagParts(t, e)
	pushTagSignature(t, reg, repo, digest, payload, map[string]string{
		signature.SignatureAnnotation:   base64.StdEncoding.EncodeToString(sc.MessageSignatureContent().Signature()),
		signature.CertificateAnnotation: certificate,
		signature.RekorBundleAnnotation: rekorBundle,
	})
}

// tagParts are what cosign 2's tag layouts (.sig and .att) carry of a
// keyless signature e: its certificate in PEM, its signature content, and
// its Rekor entry as RekorBundleAnnotation holds it.
func (s *Sigstore) tagParts(t testing.TB, e *ca.TestEntity) (certificate string, sc verify.SignatureContent, rekorBundle string) {
	t.Helper()
	vc, err := e.VerificationContent()
	if err != nil {
		t.Fatal(err)
	}
	sc, err = e.SignatureContent()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := e.TlogEntries()
	if err != nil || len(entries) != 1 {
		t.Fatalf("the virtual Sigstore logged %d entries: %v", len(entries), err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: vc.Certificate().Raw})), sc, s.rekorBundle(t, entries[0])
}

// rekorBundle is entry as cosign 2's RekorBundleAnnotation holds it.
func (s *Sigstore) rekorBundle(t testing.TB, entry *tlog.Entry) string {
	t.Helper()
	tle := s.logEntry(t, entry)
	data, err := json.Marshal(map[string]any{
		"SignedEntryTimestamp": tle.GetInclusionPromise().GetSignedEntryTimestamp(),
		"Payload": map[string]any{
			"body":           tle.GetCanonicalizedBody(),
			"integratedTime": tle.GetIntegratedTime(),
			"logIndex":       tle.GetLogIndex(),
			"logID":          hex.EncodeToString(tle.GetLogId().GetKeyId()),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// SignBundle signs repo@digest keyless, with a certificate for subject
// and issuer, in the cosign 3 layout: a Sigstore bundle with its Rekor
// entry and inclusion proof, pushed as a referrer of the image.
func (s *Sigstore) SignBundle(t testing.TB, reg *registry.Registry, repo, digest, subject, issuer string) {
	t.Helper()
	s.pushStatement(t, reg, repo, digest, subject, issuer, statement(reg.Image(repo), digest), nil)
}

// logEntry is entry as a bundle holds it: with its kind and version and
// the log's signed entry timestamp, which VirtualSigstore's entries keep
// apart.
func (s *Sigstore) logEntry(t testing.TB, entry *tlog.Entry) *protorekor.TransparencyLogEntry {
	t.Helper()
	tle := proto.Clone(entry.TransparencyLogEntry()).(*protorekor.TransparencyLogEntry)
	var kind struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(tle.GetCanonicalizedBody(), &kind); err != nil {
		t.Fatalf("reading a Rekor entry: %v", err)
	}
	tle.KindVersion = &protorekor.KindVersion{Kind: kind.Kind, Version: kind.APIVersion}
	set, err := s.vs.RekorSignPayload(tlog.RekorPayload{
		Body:           base64.StdEncoding.EncodeToString(tle.GetCanonicalizedBody()),
		IntegratedTime: tle.GetIntegratedTime(),
		LogIndex:       tle.GetLogIndex(),
		LogID:          hex.EncodeToString(tle.GetLogId().GetKeyId()),
	})
	if err != nil {
		t.Fatalf("signing a Rekor entry: %v", err)
	}
	tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
	return tle
}

// pushTagSignature adds a simple-signing layer with annotations to the
// manifest at the .sig tag of digest, creating it when missing.
func pushTagSignature(t testing.TB, reg *registry.Registry, repo, digest string, payload []byte, annotations map[string]string) {
	t.Helper()
	pushTagLayer(t, reg, repo, signature.SignatureTag(digest), signature.SimpleSigningMediaType, payload, annotations)
}

// pushBundle pushes pb as a referrer of repo@digest. The in-process
// registry reports a referrer's artifactType from its config media type,
// so the bundle type is set there.
func pushBundle(t testing.TB, reg *registry.Registry, repo, digest string, pb *protobundle.Bundle) string {
	t.Helper()
	data, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatalf("encoding a bundle: %v", err)
	}
	return pushBundleData(t, reg, repo, digest, data)
}

// PushLargeBundle pushes size bytes of junk as a Sigstore bundle referrer
// of repo@digest, as someone filling the referrers to stop verification
// would.
func PushLargeBundle(t testing.TB, reg *registry.Registry, repo, digest string, size int) {
	t.Helper()
	_ = pushBundleData(t, reg, repo, digest, bytes.Repeat([]byte("x"), size))
}

// pushBundleData pushes data as a bundle referrer of repo@digest.
func pushBundleData(t testing.TB, reg *registry.Registry, repo, digest string, data []byte) string {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, signature.BundleArtifactType)
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(data, signature.BundleArtifactType)})
	if err != nil {
		t.Fatalf("adding a bundle layer: %v", err)
	}
	subject, err := reg.Get(repo, digest)
	if err != nil {
		t.Fatalf("reading the image a bundle signs: %v", err)
	}
	return reg.PushReferrer(t, repo, mutate.Subject(img, subject.Descriptor).(v1.Image))
}
