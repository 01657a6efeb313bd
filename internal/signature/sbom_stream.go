package signature

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"google.golang.org/protobuf/encoding/protojson"
)

// Bounds of an attestation larger than MaxSignatureBytes, which is read
// as a stream (largeAttestation): an SBOM, as real ones (SPDX or
// CycloneDX of a large image) are 5-50 MB.
const (
	// MaxSBOMBytes bounds the in-toto statement of such an attestation
	// signed by a key: the SBOM and the few fields around it.
	MaxSBOMBytes = 64 << 20
	// MaxSBOMLayerBytes bounds its layer, a Sigstore bundle or a DSSE
	// envelope: MaxSBOMBytes in base64, and MaxSignatureBytes for the
	// rest (signature, certificate, log entries). A layer that says it
	// is larger is not read.
	MaxSBOMLayerBytes = (MaxSBOMBytes+2)/3*4 + MaxSignatureBytes
	// MaxKeylessSBOMBytes bounds the statement of a keyless one, which
	// is checked held whole (see largeKeyless), and the statements the
	// process checks so at once.
	MaxKeylessSBOMBytes = 16 << 20
	// MaxKeylessSBOMLayerBytes bounds the layer of a keyless one, as
	// MaxSBOMLayerBytes does a key-signed one's.
	MaxKeylessSBOMLayerBytes = (MaxKeylessSBOMBytes+2)/3*4 + MaxSignatureBytes
	// MaxStreamedAttestations is the most such layers read per digest
	// (an SPDX and a CycloneDX SBOM); others are named in a refusal,
	// unread.
	MaxStreamedAttestations = 2
)

// streamBuffer is the read buffer of a layer or statement read as a
// stream.
const streamBuffer = 64 << 10

// errStatementTooLarge is the error of a payload over its bound.
var errStatementTooLarge = errors.New("its statement is over the bound")

// largeBounds are the bounds of a large attestation's statement and
// layer under p: only keyless attestations count under a keyless
// policy, so theirs apply.
func (p *cosignPolicy) largeBounds() (statement, layer int64, kind string) {
	if p.keys == nil {
		return MaxKeylessSBOMBytes, MaxKeylessSBOMLayerBytes, "a keyless attestation"
	}
	return MaxSBOMBytes, MaxSBOMLayerBytes, "an attestation"
}

// largeAttestation judges an attestation layer of img over
// MaxSignatureBytes (a bundle among the referrers, or a DSSE envelope at
// the .att tag) without holding its statement in memory while it is
// read: the layer is read once, its base64 payload decoded into a
// temporary file (spoolLayer) while the rest of the bundle or envelope
// is kept; the file is then read again for the statement's subject and
// predicate type, the predicate skipped (readStatement). A statement
// that names digest and is an SBOM then has its signature checked by
// sigstore-go under p: a key signature against the SHA-256 of the DSSE
// pre-authentication encoding, computed on that second read; a keyless
// one with its payload held whole (largeKeyless).
//
// It returns the statement, its predicate left out, when it counts;
// otherwise a note saying why it does not, naming where and the layer.
// Errors are the registry's (a layer that is not what its descriptor
// says) or ctx's, while waiting to check a keyless one.
func (p *cosignPolicy) largeAttestation(ctx context.Context, img v1.Image, layer v1.Descriptor, digest v1.Hash, where string) (*intoto.Statement, string, error) {
	where = fmt.Sprintf("%s (layer %s, %d bytes)", where, layer.Digest, layer.Size)
	maxStatement, maxLayer, kind := p.largeBounds()
	if layer.Size > maxLayer {
		return nil, fmt.Sprintf("%s is over the %d-byte bound of %s and was not read", where, maxLayer, kind), nil
	}
	spool, err := os.CreateTemp("", "uprev-attestation-*")
	if err != nil {
		return nil, "", fmt.Errorf("spooling layer %s: %w", layer.Digest, err)
	}
	defer func() {
		_ = spool.Close()
		_ = os.Remove(spool.Name())
	}()
	size, kept, splitErr, err := spoolLayer(img, layer, spool, maxStatement, maxLayer)
	switch {
	case err != nil:
		return nil, "", err
	case errors.Is(splitErr, errStatementTooLarge):
		return nil, fmt.Sprintf("%s: its statement is more than %d bytes, the bound of %s's statement", where, maxStatement, kind), nil
	case splitErr != nil:
		return nil, fmt.Sprintf("%s does not parse: %v", where, splitErr), nil
	}
	env, why := envelopeParts(kept, layer)
	switch {
	case why != "":
		return nil, fmt.Sprintf("%s %s", where, why), nil
	case env.keyless && p.keys != nil:
		return nil, fmt.Sprintf("%s is signed by a certificate, not by a key of the secret", where), nil
	case !env.keyless && p.keys == nil:
		return nil, fmt.Sprintf("%s is signed by a key, not by a certificate of the trusted root", where), nil
	}
	st, pae, err := readStatement(spool, env.payloadType, size)
	if err != nil {
		return nil, "", fmt.Errorf("spooling layer %s: %w", layer.Digest, err)
	}
	switch {
	case st == nil:
		return nil, fmt.Sprintf("%s: its statement does not parse", where), nil
	case !statementSubjects(st, digest):
		return nil, fmt.Sprintf("%s is about another digest", where), nil
	case !isSBOM(st.GetPredicateType()):
		return nil, fmt.Sprintf("%s is of predicate type %q: past %d bytes only SBOMs are read", where, st.GetPredicateType(), MaxSignatureBytes), nil
	}
	var v Verdict
	if env.keyless {
		v, err = p.largeKeyless(ctx, spool, size, env, st, layer, digest, where)
		if err != nil {
			return nil, "", err
		}
	} else {
		entity := &tagEntity{signature: bundle.NewMessageSignature(pae, "SHA2_256", env.signature), verification: &bundle.PublicKey{}}
		v = p.verifyEntity(signedEntity{entity: entity, where: where,
			artifact: func() verify.ArtifactPolicyOption { return verify.WithArtifactDigest("sha256", pae) }})
	}
	if !v.Verified {
		return nil, v.Detail, nil
	}
	return st, "", nil
}

// spoolLayer reads layer of img once, at most maxLayer bytes, decoding
// its base64 payload into spool, at most maxStatement bytes: size is the
// payload's, kept the bundle or envelope without it. splitErr says why
// the layer does not parse or is over its bound (errStatementTooLarge);
// err is the registry's.
func spoolLayer(img v1.Image, layer v1.Descriptor, spool io.Writer, maxStatement, maxLayer int64) (size int64, kept []byte, splitErr, err error) {
	l, err := img.LayerByDigest(layer.Digest)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading layer %s: %w", layer.Digest, err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading layer %s: %w", layer.Digest, err)
	}
	defer func() { _ = rc.Close() }() // read only
	src := &sourceReader{r: io.LimitReader(rc, maxLayer)}
	br := bufio.NewReaderSize(src, streamBuffer)
	take := func(payload io.Reader) error {
		n, err := io.Copy(spool, io.LimitReader(base64.NewDecoder(base64.StdEncoding, payload), maxStatement+1))
		size = n
		switch {
		case err != nil:
			return fmt.Errorf("decoding its payload: %w", err)
		case n > maxStatement:
			return errStatementTooLarge
		}
		return nil
	}
	path := []string{"payload"}
	if layer.MediaType == BundleArtifactType {
		path = []string{"dsseEnvelope", "payload"}
	}
	kept, splitErr = splitJSON(br, path, `""`, take, MaxSignatureBytes)
	if splitErr == nil {
		// To its end, so that its digest is checked.
		_, _ = io.Copy(io.Discard, br)
	}
	if src.err != nil {
		return 0, nil, nil, fmt.Errorf("reading layer %s: %w", layer.Digest, src.err)
	}
	return size, kept, splitErr, nil
}

// readStatement reads the statement of size bytes in spool, its
// predicate skipped, and the SHA-256 of its DSSE pre-authentication
// encoding with payloadType. st is nil when the statement does not
// parse; err is the file's.
func readStatement(spool io.ReadSeeker, payloadType string, size int64) (st *intoto.Statement, pae []byte, err error) {
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "DSSEv1 %d %s %d ", len(payloadType), payloadType, size) // a hash: its writes never fail
	sr := bufio.NewReaderSize(io.TeeReader(spool, h), streamBuffer)
	header, splitErr := splitJSON(sr, []string{"predicate"}, "{}", nil, MaxSignatureBytes)
	if _, err := io.Copy(io.Discard, sr); err != nil {
		return nil, nil, err
	}
	st = &intoto.Statement{}
	if splitErr != nil || (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(header, st) != nil {
		st = nil
	}
	return st, h.Sum(nil), nil
}

// largeEnvelope is what a large attestation's bundle or envelope holds
// besides its payload.
type largeEnvelope struct {
	payloadType string
	// signature is the envelope's one signature.
	signature []byte
	// keyID is the key ID the signature names, if any.
	keyID string
	// keyless tells a certificate signature from a key signature.
	keyless bool
	// bundle is the Sigstore bundle, its payload left out; nil for an
	// envelope at the .att tag.
	bundle *protobundle.Bundle
}

// envelopeParts reads the parts of kept, a bundle or a DSSE envelope
// without its payload, as largeEnvelope; why says why they cannot be
// used.
func envelopeParts(kept []byte, layer v1.Descriptor) (env largeEnvelope, why string) {
	if layer.MediaType == BundleArtifactType {
		var pb protobundle.Bundle
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(kept, &pb); err != nil {
			return env, fmt.Sprintf("does not parse: %v", err)
		}
		d := pb.GetDsseEnvelope()
		switch {
		case d == nil:
			return env, "holds no DSSE envelope"
		case len(d.GetSignatures()) != 1:
			return env, fmt.Sprintf("has %d signatures, not one", len(d.GetSignatures()))
		}
		s := d.GetSignatures()[0]
		return largeEnvelope{payloadType: d.GetPayloadType(), signature: s.GetSig(), keyID: s.GetKeyid(),
			keyless: pb.GetVerificationMaterial().GetPublicKey() == nil, bundle: &pb}, ""
	}
	var d dsse.Envelope
	if err := json.Unmarshal(kept, &d); err != nil {
		return env, fmt.Sprintf("does not parse: %v", err)
	}
	if len(d.Signatures) != 1 {
		return env, fmt.Sprintf("has %d signatures, not one", len(d.Signatures))
	}
	sig, err := base64.StdEncoding.DecodeString(d.Signatures[0].Sig)
	if err != nil {
		return env, fmt.Sprintf("has a signature that does not decode: %v", err)
	}
	return largeEnvelope{payloadType: d.PayloadType, signature: sig, keyID: d.Signatures[0].KeyID,
		keyless: layer.Annotations[CertificateAnnotation] != ""}, ""
}

// sourceReader remembers the error of the registry's stream, which is
// not the document's fault.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}
