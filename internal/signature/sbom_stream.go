package signature

import (
	"bufio"
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
	// MaxSBOMBytes bounds the in-toto statement of such an attestation:
	// the SBOM and the few fields around it.
	MaxSBOMBytes = 64 << 20
	// MaxSBOMLayerBytes bounds its layer, a Sigstore bundle or a DSSE
	// envelope: MaxSBOMBytes in base64, and MaxSignatureBytes for the
	// rest (signature, certificate, log entries). A layer that says it
	// is larger is not read.
	MaxSBOMLayerBytes = (MaxSBOMBytes+2)/3*4 + MaxSignatureBytes
	// MaxStreamedAttestations is the most such layers read per digest
	// (an SPDX and a CycloneDX SBOM); others are named in a refusal,
	// unread.
	MaxStreamedAttestations = 2
)

// streamBuffer is the read buffer of a layer or statement read as a
// stream.
const streamBuffer = 64 << 10

// errStatementTooLarge is the error of a payload over MaxSBOMBytes.
var errStatementTooLarge = fmt.Errorf("its statement is more than %d bytes", MaxSBOMBytes)

// largeAttestation judges an attestation layer of img over
// MaxSignatureBytes (a bundle among the referrers, or a DSSE envelope at
// the .att tag) without holding its statement in memory: the layer is
// read once, its base64 payload decoded into a temporary file (at most
// MaxSBOMBytes) while the rest of the bundle or envelope is kept; the
// file is then read again for the statement's subject and predicate
// type (the predicate is skipped) and the SHA-256 of the DSSE
// pre-authentication encoding, which the signature is verified against,
// with the key policy of sigstore-go (verifyEntity).
//
// It returns the statement, its predicate left out, when a key of p
// signed it, it names digest and it is an SBOM; otherwise a note saying
// why it does not count, naming where and the layer. Errors are the
// registry's: a layer that is not what its descriptor says.
func (p *cosignPolicy) largeAttestation(img v1.Image, layer v1.Descriptor, digest v1.Hash, where string) (*intoto.Statement, string, error) {
	where = fmt.Sprintf("%s (layer %s, %d bytes)", where, layer.Digest, layer.Size)
	switch {
	case layer.Size > MaxSBOMLayerBytes:
		return nil, fmt.Sprintf("%s is over the %d-byte bound of an attestation and was not read", where, MaxSBOMLayerBytes), nil
	case p.keys == nil:
		// sigstore-go checks a keyless attestation's log entry against
		// its payload held whole; see docs/gates.md.
		return nil, fmt.Sprintf("%s is over %d bytes: past that size only key-signed attestations are read, not keyless ones", where, MaxSignatureBytes), nil
	}
	l, err := img.LayerByDigest(layer.Digest)
	if err != nil {
		return nil, "", fmt.Errorf("reading layer %s: %w", layer.Digest, err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, "", fmt.Errorf("reading layer %s: %w", layer.Digest, err)
	}
	defer func() { _ = rc.Close() }() // read only
	spool, err := os.CreateTemp("", "uprev-attestation-*")
	if err != nil {
		return nil, "", fmt.Errorf("spooling layer %s: %w", layer.Digest, err)
	}
	defer func() {
		_ = spool.Close()
		_ = os.Remove(spool.Name())
	}()

	src := &sourceReader{r: io.LimitReader(rc, MaxSBOMLayerBytes)}
	br := bufio.NewReaderSize(src, streamBuffer)
	var size int64
	take := func(payload io.Reader) error {
		n, err := io.Copy(spool, io.LimitReader(base64.NewDecoder(base64.StdEncoding, payload), MaxSBOMBytes+1))
		size = n
		switch {
		case err != nil:
			return fmt.Errorf("decoding its payload: %w", err)
		case n > MaxSBOMBytes:
			return errStatementTooLarge
		}
		return nil
	}
	path := []string{"payload"}
	if layer.MediaType == BundleArtifactType {
		path = []string{"dsseEnvelope", "payload"}
	}
	kept, splitErr := splitJSON(br, path, `""`, take, MaxSignatureBytes)
	if splitErr == nil {
		// To its end, so that its digest is checked.
		_, _ = io.Copy(io.Discard, br)
	}
	if src.err != nil {
		return nil, "", fmt.Errorf("reading layer %s: %w", layer.Digest, src.err)
	}
	switch {
	case errors.Is(splitErr, errStatementTooLarge):
		return nil, fmt.Sprintf("%s: %v, the bound of an attestation's statement", where, splitErr), nil
	case splitErr != nil:
		return nil, fmt.Sprintf("%s does not parse: %v", where, splitErr), nil
	}
	payloadType, sig, why := envelopeParts(kept, layer)
	if why != "" {
		return nil, fmt.Sprintf("%s %s", where, why), nil
	}

	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, "", fmt.Errorf("spooling layer %s: %w", layer.Digest, err)
	}
	pae := sha256.New()
	_, _ = fmt.Fprintf(pae, "DSSEv1 %d %s %d ", len(payloadType), payloadType, size) // a hash: its writes never fail
	sr := bufio.NewReaderSize(io.TeeReader(spool, pae), streamBuffer)
	header, splitErr := splitJSON(sr, []string{"predicate"}, "{}", nil, MaxSignatureBytes)
	if _, err := io.Copy(io.Discard, sr); err != nil {
		return nil, "", fmt.Errorf("spooling layer %s: %w", layer.Digest, err)
	}
	entity := &tagEntity{signature: bundle.NewMessageSignature(pae.Sum(nil), "SHA2_256", sig), verification: &bundle.PublicKey{}}
	sum := entity.signature.MessageSignatureContent().Digest()
	v := p.verifyEntity(signedEntity{entity: entity, where: where,
		artifact: func() verify.ArtifactPolicyOption { return verify.WithArtifactDigest("sha256", sum) }})
	if !v.Verified {
		return nil, v.Detail, nil
	}
	var st intoto.Statement
	if splitErr == nil {
		splitErr = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(header, &st)
	}
	switch {
	case splitErr != nil:
		return nil, fmt.Sprintf("%s: its statement does not parse: %v", where, splitErr), nil
	case !statementSubjects(&st, digest):
		return nil, fmt.Sprintf("%s is about another digest", where), nil
	case !isSBOM(st.GetPredicateType()):
		return nil, fmt.Sprintf("%s is of predicate type %q: past %d bytes only SBOMs are read", where, st.GetPredicateType(), MaxSignatureBytes), nil
	}
	return &st, "", nil
}

// envelopeParts reads the payload type and the one signature of the DSSE
// envelope in kept, a bundle or an envelope without its payload; why says
// why they cannot be used.
func envelopeParts(kept []byte, layer v1.Descriptor) (payloadType string, sig []byte, why string) {
	if layer.MediaType == BundleArtifactType {
		var pb protobundle.Bundle
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(kept, &pb); err != nil {
			return "", nil, fmt.Sprintf("does not parse: %v", err)
		}
		env := pb.GetDsseEnvelope()
		switch {
		case env == nil:
			return "", nil, "holds no DSSE envelope"
		case pb.GetVerificationMaterial().GetPublicKey() == nil:
			return "", nil, "is not signed by a key: past that size only key-signed attestations are read"
		case len(env.GetSignatures()) != 1:
			return "", nil, fmt.Sprintf("has %d signatures, not one", len(env.GetSignatures()))
		}
		return env.GetPayloadType(), env.GetSignatures()[0].GetSig(), ""
	}
	var env dsse.Envelope
	if err := json.Unmarshal(kept, &env); err != nil {
		return "", nil, fmt.Sprintf("does not parse: %v", err)
	}
	switch {
	case layer.Annotations[CertificateAnnotation] != "":
		return "", nil, "is not signed by a key: past that size only key-signed attestations are read"
	case len(env.Signatures) != 1:
		return "", nil, fmt.Sprintf("has %d signatures, not one", len(env.Signatures))
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		return "", nil, fmt.Sprintf("has a signature that does not decode: %v", err)
	}
	return env.PayloadType, sig, ""
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
