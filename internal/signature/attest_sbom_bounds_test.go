package signature_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/signature"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

// TestSBOMPastItsBounds pushes SBOM bundles the stream reader must stop
// at: one whose layer says it is over MaxSBOMLayerBytes is refused
// unread, and the refusal names its digest, its size and the bound; one
// that says it is 2 MiB and streams 100 MB is an error naming the layer
// once its declared size is read; one that says it is exactly
// MaxSBOMLayerBytes and streams 100 MB is cut at its statement's bound.
func TestSBOMPastItsBounds(t *testing.T) {
	key := signing.NewKey(t)
	req := signature.Requirements{SBOM: true}
	for name, c := range map[string]struct {
		declared int64
		reason   func(layer string) string
		err      bool
	}{
		"declared over the bound": {declared: signature.MaxSBOMLayerBytes + 1, reason: func(layer string) string {
			return fmt.Sprintf("(layer %s, %d bytes) is over the %d-byte bound of an attestation and was not read", layer, signature.MaxSBOMLayerBytes+1, signature.MaxSBOMLayerBytes)
		}},
		"declared as 2 MiB": {declared: 2 << 20, err: true},
		"declared as the bound": {declared: signature.MaxSBOMLayerBytes, reason: func(layer string) string {
			return fmt.Sprintf("(layer %s, %d bytes): its statement is more than %d bytes", layer, signature.MaxSBOMLayerBytes, signature.MaxSBOMBytes)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			e, bundle, huge := hugeBundle(t, c.declared)

			v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, compile(t, keySpec(t, key)), req, time.Now())
			g.Expect(huge.Served()).To(BeNumerically("<=", min(c.declared, signature.MaxSBOMLayerBytes)+8<<20), "bytes of the 100 MB bundle served")
			if c.err {
				g.Expect(err).To(MatchError(ContainSubstring("reading layer " + huge.Digest.String())))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.Passed).To(BeFalse())
			g.Expect(v.Type).To(Equal(signature.SBOMAttestation))
			g.Expect(v.Reason).To(HavePrefix(e.digest + ": no SPDX or CycloneDX attestation; bundle " + bundle + " " + c.reason(huge.Digest.String())))
			if c.declared > signature.MaxSBOMLayerBytes {
				g.Expect(huge.Served()).To(BeZero())
			}
		})
	}
}

// hugeBundle pushes a Sigstore bundle among the referrers of a new env's
// digest whose layer declares declared bytes and streams 100 MB of DSSE
// payload; it returns the env, the bundle's digest and its layer.
func hugeBundle(t *testing.T, declared int64) (*env, string, *testregistry.HugeBlob) {
	t.Helper()
	huge := testregistry.NewHugeBlob(t, hundredMB)
	huge.Prefix = []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","dsseEnvelope":{"payloadType":"application/vnd.in-toto+json","payload":"`)
	e := newEnvWith(t, 30*time.Second, testregistry.WithWrap(huge.Wrap))
	subject, err := e.reg.Get("app", e.digest)
	if err != nil {
		t.Fatal(err)
	}
	bundle := e.reg.PushManifest(t, "app", "", testregistry.OneLayer(signature.BundleArtifactType, signature.BundleArtifactType, declared, huge.Digest, &subject.Descriptor))
	return e, bundle, huge
}

// TestStreamedAttestationsPerDigest pushes three 2 MB SBOMs, each
// altered after it was signed: the first MaxStreamedAttestations are read
// and refused, the third is not read, and the refusal names all three.
func TestStreamedAttestationsPerDigest(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t)
	key := signing.NewKey(t)
	sbom := signing.LargeSPDX(2 << 20)
	var bundles []string
	for range signature.MaxStreamedAttestations + 1 {
		bundles = append(bundles, key.AttestAltered(t, e.reg, "app", e.digest, signing.SPDXDocument, sbom))
	}
	v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, compile(t, keySpec(t, key)), signature.Requirements{SBOM: true}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Passed).To(BeFalse())
	g.Expect(strings.Count(v.Reason, "is not signed by a key of the secret")).To(Equal(signature.MaxStreamedAttestations))
	g.Expect(v.Reason).To(ContainSubstring(fmt.Sprintf("was not read: %d attestations over %d bytes were read already", signature.MaxStreamedAttestations, signature.MaxSignatureBytes)))
	for _, b := range bundles {
		g.Expect(v.Reason).To(ContainSubstring("bundle " + b))
	}
}
