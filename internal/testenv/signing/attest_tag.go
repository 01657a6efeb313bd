package signing

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/uprev-dev/uprev/internal/signature"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// AttestTag attests predicate, of predicateType, about repo@digest with k
// in the cosign 2 layout: a DSSE envelope added as a layer of the
// manifest at signature.AttestationTag(digest), as `cosign attest --key`
// did before cosign 3.
func (k *Key) AttestTag(t testing.TB, reg *registry.Registry, repo, digest, predicateType string, predicate []byte) {
	t.Helper()
	const payloadType = "application/vnd.in-toto+json"
	body := attestation(reg.Image(repo), digest, predicateType, predicate)
	env := dsse.Envelope{PayloadType: payloadType, Payload: base64.StdEncoding.EncodeToString(body),
		Signatures: []dsse.Signature{{Sig: base64.StdEncoding.EncodeToString(k.sign(t, dsse.PAE(payloadType, body)))}}}
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatalf("encoding an envelope: %v", err)
	}
	pushTagLayer(t, reg, repo, signature.AttestationTag(digest), signature.DSSEMediaType, data,
		map[string]string{signature.SignatureAnnotation: "", "predicateType": predicateType})
}

// pushTagLayer adds a layer of data to the manifest at repo:tag (a new
// one when there is none), as cosign 2 adds signatures and attestations.
func pushTagLayer(t testing.TB, reg *registry.Registry, repo, tag string, mediaType types.MediaType, data []byte, annotations map[string]string) {
	t.Helper()
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	if existing, err := reg.Get(repo, tag); err == nil {
		if base, err = existing.Image(); err != nil {
			t.Fatalf("reading %s: %v", tag, err)
		}
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: static.NewLayer(data, mediaType), Annotations: annotations})
	if err != nil {
		t.Fatalf("adding a layer to %s: %v", tag, err)
	}
	reg.Push(t, repo, tag, img)
}

// AttestTag attests predicate, of predicateType, about repo@digest
// keyless, with a certificate for subject and issuer, in the cosign 2
// layout: a DSSE envelope added as a layer of the manifest at
// signature.AttestationTag(digest), with the certificate and the Rekor
// entry in its annotations, as `cosign attest --yes` did before cosign 3.
func (s *Sigstore) AttestTag(t testing.TB, reg *registry.Registry, repo, digest, subject, issuer, predicateType string, predicate []byte) {
	t.Helper()
	body := attestation(reg.Image(repo), digest, predicateType, predicate)
	e, err := s.vs.AttestAtTime(subject, issuer, body, time.Now().Add(5*time.Minute), true)
	if err != nil {
		t.Fatalf("attesting keyless: %v", err)
	}
	certificate, sc, rekorBundle := s.tagParts(t, e)
	data, err := json.Marshal(sc.EnvelopeContent().RawEnvelope())
	if err != nil {
		t.Fatalf("encoding an envelope: %v", err)
	}
	pushTagLayer(t, reg, repo, signature.AttestationTag(digest), signature.DSSEMediaType, data, map[string]string{
		signature.SignatureAnnotation:   "",
		signature.CertificateAnnotation: certificate,
		signature.RekorBundleAnnotation: rekorBundle,
		"predicateType":                 predicateType,
	})
}
