package signature

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/sigstore/sigstore-go/pkg/bundle"
)

// DSSEMediaType is the media type of a cosign 2 attestation layer: a DSSE
// envelope of an in-toto statement.
const DSSEMediaType = "application/vnd.dsse.envelope.v1+json"

// AttestationTag is the tag where cosign 2 stores the attestations of
// digest: sha256:abc… → sha256-abc….att.
func AttestationTag(digest string) string {
	return strings.Replace(digest, ":", "-", 1) + ".att"
}

// tagAttestations reads the attestations of the cosign 2 layout (`cosign
// attest` before cosign 3): the DSSE envelopes in the layers of the
// manifest at AttestationTag(digest), at most MaxSignatures, each at most
// MaxSignatureBytes (a larger one goes to large, or is skipped when large
// is nil), with their key or
// certificate and Rekor entry in the layer annotations. An envelope whose
// statement names another digest is left out.
func tagAttestations(ctx context.Context, reg Registry, image string, digest v1.Hash, large largeLayer) ([]signedEntity, error) {
	artifact, err := namesDigest(digest)
	if err != nil {
		return nil, err
	}
	tag := AttestationTag(digest.String())
	keep := func(layer v1.Descriptor) bool {
		return layer.MediaType == DSSEMediaType && (large != nil || layer.Size <= MaxSignatureBytes)
	}
	out, err := tagLayers(ctx, reg, image, tag, keep, large, func(i int, layer v1.Descriptor, data []byte) (signedEntity, bool) {
		var env dsse.Envelope
		if json.Unmarshal(data, &env) != nil {
			return signedEntity{}, false
		}
		e := &tagEntity{signature: &bundle.Envelope{Envelope: &env}}
		keyless, err := e.readMaterial(layer.Annotations)
		if err != nil || !envelopeNames(e, digest) {
			// An attestation that does not parse, or of another image,
			// verifies nothing.
			return signedEntity{}, false
		}
		return signedEntity{
			entity:   e,
			artifact: artifact,
			keyless:  keyless,
			where:    fmt.Sprintf("attestation %d at tag %s", i, tag),
		}, true
	})
	if err != nil {
		return nil, fmt.Errorf("reading the cosign attestations of %s@%s: %w", image, digest, err)
	}
	return out, nil
}

// envelopeNames tells whether the in-toto statement of e's envelope names
// digest among its subjects.
func envelopeNames(e *tagEntity, digest v1.Hash) bool {
	st, err := statementOf(e)
	return err == nil && statementSubjects(st, digest)
}
