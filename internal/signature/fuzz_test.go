package signature

import (
	"bytes"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/verify"
)

// FuzzTagSignature feeds what a registry serves in the cosign 2 layout (a
// payload and the annotations of its layer) to the parsing and the
// verification of a keyless and of a key policy: nothing may panic, and
// nothing made up verifies.
func FuzzTagSignature(f *testing.F) {
	f.Add([]byte(`{"critical":{"image":{"docker-manifest-digest":"sha256:00"}}}`), "MEUCIQ==", "", "")
	f.Add([]byte(`{}`), "AAAA", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", `{"SignedEntryTimestamp":"AA==","Payload":{"body":"e30=","integratedTime":1,"logIndex":1,"logID":"00"}}`)
	keyless, err := Compile(Spec{Identities: []Identity{{Issuer: ".*", Subject: ".*"}}})
	if err != nil {
		f.Fatal(err)
	}
	keyed, err := Compile(Spec{Keys: map[string][]byte{"cosign.pub": []byte("-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE2G2Y+2tabdTV5BcGiBIx0a9fAFwrkBbmLSGtks4L3qX6yYY0zufBnhC8Ur/iy55GhWP/9A/bY2LhC30M9+RYtw==\n-----END PUBLIC KEY-----\n")}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte, sig, cert, rekor string) {
		entity, keylessSig, err := newTagEntity(payload, map[string]string{
			SignatureAnnotation: sig, CertificateAnnotation: cert, RekorBundleAnnotation: rekor,
		})
		if err != nil {
			return
		}
		e := signedEntity{
			entity:   entity,
			artifact: func() verify.ArtifactPolicyOption { return verify.WithArtifact(bytes.NewReader(payload)) },
			keyless:  keylessSig,
			where:    "fuzzed",
		}
		for _, p := range []Policy{keyless, keyed} {
			if v := p.(*cosignPolicy).verifyEntity(e); v.Verified {
				t.Fatalf("a made-up signature verified: %q %q %q", payload, sig, cert)
			}
		}
	})
}
