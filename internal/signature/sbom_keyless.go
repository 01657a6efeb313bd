package signature

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"golang.org/x/sync/semaphore"
)

// keylessMemory bounds the statements of large keyless attestations the
// process holds at once (largeKeyless), by their size.
var keylessMemory = semaphore.NewWeighted(MaxKeylessSBOMBytes)

// largeKeyless checks the keyless signature of a large attestation, its
// statement of size bytes in spool and st (its predicate left out), with
// sigstore-go's keyless policy of p: the certificate's chain and
// identity, its transparency-log entry and the signature.
//
// sigstore-go checks the log entry's payload hash and the DSSE signature
// against the envelope's payload held whole, so, unlike a key-signed
// one, the payload is held: its base64 (4/3 of size), and its decoded
// form and pre-authentication encoding while they are checked, about 3.5
// times size in all. MaxKeylessSBOMBytes bounds size, and keylessMemory
// the sizes checked at once; waiting for it ends with ctx. The statement
// sigstore-go is given is st, not the payload parsed again.
func (p *cosignPolicy) largeKeyless(ctx context.Context, spool io.ReadSeeker, size int64, env largeEnvelope, st *intoto.Statement, layer v1.Descriptor, digest v1.Hash, where string) (Verdict, error) {
	if err := keylessMemory.Acquire(ctx, size); err != nil {
		return Verdict{}, fmt.Errorf("waiting to check %s: %w", where, err)
	}
	defer keylessMemory.Release(size)
	payload, err := base64Of(spool, size)
	if err != nil {
		return Verdict{}, fmt.Errorf("spooling layer %s: %w", layer.Digest, err)
	}
	signature := &statementEnvelope{Envelope: &bundle.Envelope{Envelope: &dsse.Envelope{
		PayloadType: env.payloadType,
		Payload:     payload,
		Signatures:  []dsse.Signature{{KeyID: env.keyID, Sig: base64.StdEncoding.EncodeToString(env.signature)}},
	}}, statement: st}
	var entity verify.SignedEntity
	if env.bundle != nil {
		b, err := bundle.NewBundle(env.bundle)
		if err != nil {
			return Verdict{Reason: UntrustedChain, Detail: fmt.Sprintf("%s does not parse: %v", where, err)}, nil
		}
		entity = withSignature{SignedEntity: b, signature: signature}
	} else {
		e := &tagEntity{signature: signature}
		if _, err := e.readMaterial(layer.Annotations); err != nil {
			return Verdict{Reason: UntrustedChain, Detail: fmt.Sprintf("%s: %v", where, err)}, nil
		}
		entity = e
	}
	artifact, err := namesDigest(digest)
	if err != nil {
		return Verdict{}, err
	}
	return p.verifyEntity(signedEntity{entity: entity, keyless: true, where: where, artifact: artifact}), nil
}

// base64Of reads the size bytes of spool into their base64, in one
// string of that length.
func base64Of(spool io.ReadSeeker, size int64) (string, error) {
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(base64.StdEncoding.EncodedLen(int(size)))
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	if _, err := io.Copy(enc, io.LimitReader(spool, size)); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	return b.String(), nil
}

// statementEnvelope is a DSSE envelope whose statement is known already:
// sigstore-go reads the statement only for its subjects, which a large
// attestation's statement without its predicate has.
type statementEnvelope struct {
	*bundle.Envelope
	statement *intoto.Statement
}

// Statement implements verify.EnvelopeContent.
func (e *statementEnvelope) Statement() (*intoto.Statement, error) { return e.statement, nil }

// EnvelopeContent implements verify.SignatureContent.
func (e *statementEnvelope) EnvelopeContent() verify.EnvelopeContent { return e }

// withSignature is a signed entity whose signature content is another.
type withSignature struct {
	verify.SignedEntity
	signature verify.SignatureContent
}

// SignatureContent implements verify.SignedEntity.
func (w withSignature) SignatureContent() (verify.SignatureContent, error) { return w.signature, nil }
