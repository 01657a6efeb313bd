package signature

import (
	"crypto/sha256"

	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// tagEntity is one signature of the cosign 2 layout as sigstore-go's
// SignedEntity: a message signature over the simple-signing payload, with
// a key or a certificate, and the Rekor entry cosign attached.
type tagEntity struct {
	verify.BaseSignedEntity
	signature    verify.SignatureContent
	verification verify.VerificationContent
	entries      []*tlog.Entry
}

// rekorBundle is the RekorBundleAnnotation of cosign 2: a Rekor entry with
// its signed entry timestamp.
type rekorBundle struct {
	SignedEntryTimestamp []byte `json:"SignedEntryTimestamp"`
	Payload              struct {
		Body           []byte `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogIndex       int64  `json:"logIndex"`
		LogID          string `json:"logID"`
	} `json:"Payload"`
}

// newTagEntity reads one cosign 2 signature from its payload and layer
// annotations; keyless tells whether it carries a certificate.
func newTagEntity(payload []byte, annotations map[string]string) (*tagEntity, bool, error) {
	sig, err := base64.StdEncoding.DecodeString(annotations[SignatureAnnotation])
	if err != nil {
		return nil, false, fmt.Errorf("decoding the signature: %w", err)
	}
	sum := sha256.Sum256(payload)
	e := &tagEntity{signature: bundle.NewMessageSignature(sum[:], "SHA2_256", sig)}
	keyless, err := e.readMaterial(annotations)
	return e, keyless, err
}

// readMaterial reads the key or certificate, and the Rekor entry, of a
// cosign 2 layer from its annotations; keyless tells whether it carries a
// certificate.
func (e *tagEntity) readMaterial(annotations map[string]string) (keyless bool, err error) {
	certPEM := annotations[CertificateAnnotation]
	if certPEM == "" {
		e.verification = &bundle.PublicKey{}
		return false, nil
	}
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(certPEM))
	if err != nil || len(certs) == 0 {
		return true, errors.New("the certificate does not parse")
	}
	e.verification = bundle.NewCertificate(certs[0])
	if raw := annotations[RekorBundleAnnotation]; raw != "" {
		var rb rekorBundle
		if err := json.Unmarshal([]byte(raw), &rb); err != nil {
			return true, fmt.Errorf("the Rekor bundle does not parse: %w", err)
		}
		logID, err := hex.DecodeString(rb.Payload.LogID)
		if err != nil {
			return true, fmt.Errorf("the Rekor log ID does not parse: %w", err)
		}
		entry, err := tlog.NewEntry(rb.Payload.Body, rb.Payload.IntegratedTime, rb.Payload.LogIndex, logID, rb.SignedEntryTimestamp, nil) //nolint:staticcheck // cosign 2's bundle has exactly these fields
		if err != nil {
			return true, fmt.Errorf("the Rekor entry does not parse: %w", err)
		}
		e.entries = []*tlog.Entry{entry}
	}
	return true, nil
}

// VerificationContent implements verify.SignedEntity.
func (e *tagEntity) VerificationContent() (verify.VerificationContent, error) {
	return e.verification, nil
}

// SignatureContent implements verify.SignedEntity.
func (e *tagEntity) SignatureContent() (verify.SignatureContent, error) {
	return e.signature, nil
}

// Timestamps implements verify.SignedEntity: cosign 2's layout has none
// but the Rekor entry's.
func (e *tagEntity) Timestamps() ([][]byte, error) { return nil, nil }

// TlogEntries implements verify.SignedEntity.
func (e *tagEntity) TlogEntries() ([]*tlog.Entry, error) { return e.entries, nil }

// HasInclusionPromise implements verify.SignedEntity.
func (e *tagEntity) HasInclusionPromise() bool { return len(e.entries) > 0 }

// Version implements verify.SignedEntity: the layout predates bundle
// versions and verifies as the first one did.
func (e *tagEntity) Version() (string, error) { return "v0.1", nil }
