package signing

import (
	"encoding/base64"
	"testing"
	"time"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"

	"github.com/uprev-dev/uprev/internal/signature"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// Attest attests predicate, of predicateType, about repo@digest keyless,
// with a certificate for subject and issuer, as GitHub artifact
// attestations and `cosign attest` do: a Sigstore bundle with its Rekor
// entry, pushed as a referrer of the image.
func (s *Sigstore) Attest(t testing.TB, reg *registry.Registry, repo, digest, subject, issuer, predicateType string, predicate []byte) string {
	t.Helper()
	return s.pushStatement(t, reg, repo, digest, subject, issuer, attestation(reg.Image(repo), digest, predicateType, predicate), nil)
}

// AttestAltered attests as Attest does, then alters the payload in the
// bundle as AttestAltered of a Key does: neither the signature nor the
// log entry matches it. It returns the bundle's digest.
func (s *Sigstore) AttestAltered(t testing.TB, reg *registry.Registry, repo, digest, subject, issuer, predicateType string, predicate []byte) string {
	t.Helper()
	return s.pushStatement(t, reg, repo, digest, subject, issuer, attestation(reg.Image(repo), digest, predicateType, predicate), alterPredicate)
}

// pushStatement signs the in-toto statement body keyless and pushes its
// bundle as a referrer of repo@digest, its payload changed by alter when
// it is not nil; it returns the bundle's digest.
func (s *Sigstore) pushStatement(t testing.TB, reg *registry.Registry, repo, digest, subject, issuer string, body []byte, alter func([]byte) []byte) string {
	t.Helper()
	e, err := s.vs.AttestAtTime(subject, issuer, body, time.Now().Add(5*time.Minute), true)
	if err != nil {
		t.Fatalf("signing keyless: %v", err)
	}
	vc, err := e.VerificationContent()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := e.SignatureContent()
	if err != nil {
		t.Fatal(err)
	}
	env := sc.EnvelopeContent().RawEnvelope()
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if alter != nil {
		payload = alter(payload)
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := e.TlogEntries()
	if err != nil {
		t.Fatal(err)
	}
	tles := make([]*protorekor.TransparencyLogEntry, 0, len(entries))
	for _, entry := range entries {
		tles = append(tles, s.logEntry(t, entry))
	}
	pb := &protobundle.Bundle{
		MediaType: signature.BundleArtifactType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:     &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw}},
			TlogEntries: tles,
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload: payload, PayloadType: env.PayloadType,
			Signatures: []*protodsse.Signature{{Sig: sig}},
		}},
	}
	return pushBundle(t, reg, repo, digest, pb)
}
