package signature_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/signature"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

// releaseIdentity is the identity keyless tests of large SBOMs trust.
const releaseIdentity = `^https://github.com/acme/agent/\.github/workflows/release\.yaml@.*$`

// TestLargeKeylessSBOM attests a 4 MB SPDX SBOM keyless, as GitHub
// artifact attestations and `cosign attest` do, in the cosign 3 layout
// (a bundle among the referrers) and in cosign 2's (a layer of the .att
// tag): either counts. sigstore-go checks its log entry and signature
// against the payload held whole, so judging it allocates a few times
// its size (5.4 times, 6.4 under the race detector, with the in-process
// registry's own), not the twenty times a whole-document decode takes.
func TestLargeKeylessSBOM(t *testing.T) {
	sbom := signing.LargeSPDX(4 << 20)
	for name, attest := range map[string]func(e *env, s *signing.Sigstore){
		"bundle": func(e *env, s *signing.Sigstore) {
			s.Attest(t, e.reg, "app", e.digest, releaseFlow, githubIssuer, signing.SPDXDocument, sbom)
		},
		".att tag": func(e *env, s *signing.Sigstore) {
			s.AttestTag(t, e.reg, "app", e.digest, releaseFlow, githubIssuer, signing.SPDXDocument, sbom)
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t)
			s := signing.NewSigstore(t)
			attest(e, s)
			policy := compile(t, keylessSpec(t, s, releaseIdentity))

			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, policy, signature.Requirements{SBOM: true}, time.Now())
			runtime.ReadMemStats(&after)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.Passed).To(BeTrue(), v.Reason)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("judging a %d-byte keyless SBOM allocated %d bytes (registry and client together)", len(sbom), allocated)
			g.Expect(allocated).To(BeNumerically("<", 8*len(sbom)), "bytes allocated while judging a 4 MB keyless SBOM")
		})
	}
}

// TestLargeKeylessSBOMRefused pushes large SBOMs that must not count
// under a keyless policy: one altered after it was signed (its log entry
// names another payload), one signed by another workflow, one signed by
// a key, one whose layer says it is over MaxKeylessSBOMLayerBytes (not
// read at all), and one whose statement is over MaxKeylessSBOMBytes.
// Each refusal names the bundle and says why. Under a key policy, a
// large keyless one does not count either.
func TestLargeKeylessSBOMRefused(t *testing.T) {
	// Its layer, in base64, is over MaxSignatureBytes: it is read as a
	// stream.
	sbom := signing.LargeSPDX(signature.MaxSignatureBytes)
	req := signature.Requirements{SBOM: true}
	judge := func(t *testing.T, e *env, s *signing.Sigstore) signature.AttestationVerdict {
		t.Helper()
		v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, compile(t, keylessSpec(t, s, releaseIdentity)), req, time.Now())
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(v.Passed).To(BeFalse())
		NewWithT(t).Expect(v.Type).To(Equal(signature.SBOMAttestation))
		return v
	}

	t.Run("altered after signing", func(t *testing.T) {
		e := newEnv(t)
		s := signing.NewSigstore(t)
		bundle := s.AttestAltered(t, e.reg, "app", e.digest, releaseFlow, githubIssuer, signing.SPDXDocument, sbom)
		v := judge(t, e, s)
		NewWithT(t).Expect(v.Reason).To(HavePrefix(e.digest + ": no SPDX or CycloneDX attestation; bundle " + bundle))
		NewWithT(t).Expect(v.Reason).To(ContainSubstring("does not match"))
	})

	t.Run("another workflow", func(t *testing.T) {
		e := newEnv(t)
		s := signing.NewSigstore(t)
		other := "https://github.com/acme/agent/.github/workflows/nightly.yaml@refs/heads/main"
		bundle := s.Attest(t, e.reg, "app", e.digest, other, githubIssuer, signing.SPDXDocument, sbom)
		v := judge(t, e, s)
		NewWithT(t).Expect(v.Reason).To(HavePrefix(e.digest + ": no SPDX or CycloneDX attestation; bundle " + bundle))
		NewWithT(t).Expect(v.Reason).To(ContainSubstring("no matching CertificateIdentity"))
	})

	t.Run("signed by a key", func(t *testing.T) {
		e := newEnv(t)
		s := signing.NewSigstore(t)
		bundle := signing.NewKey(t).Attest(t, e.reg, "app", e.digest, signing.SPDXDocument, sbom)
		v := judge(t, e, s)
		NewWithT(t).Expect(v.Reason).To(HavePrefix(e.digest + ": no SPDX or CycloneDX attestation; bundle " + bundle))
		NewWithT(t).Expect(v.Reason).To(HaveSuffix("is signed by a key, not by a certificate of the trusted root"))
	})

	t.Run("keyless under a key policy", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t)
		bundle := signing.NewSigstore(t).Attest(t, e.reg, "app", e.digest, releaseFlow, githubIssuer, signing.SPDXDocument, sbom)
		v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, compile(t, keySpec(t, signing.NewKey(t))), req, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.Passed).To(BeFalse())
		g.Expect(v.Reason).To(HavePrefix(e.digest + ": no SPDX or CycloneDX attestation; bundle " + bundle))
		g.Expect(v.Reason).To(HaveSuffix("is signed by a certificate, not by a key of the secret"))
	})

	t.Run("declared over the keyless bound", func(t *testing.T) {
		declared := int64(signature.MaxKeylessSBOMLayerBytes + 1)
		e, bundle, huge := hugeBundle(t, declared)
		v := judge(t, e, signing.NewSigstore(t))
		NewWithT(t).Expect(v.Reason).To(HavePrefix(fmt.Sprintf("%s: no SPDX or CycloneDX attestation; bundle %s (layer %s, %d bytes) is over the %d-byte bound of a keyless attestation and was not read",
			e.digest, bundle, huge.Digest, declared, signature.MaxKeylessSBOMLayerBytes)))
		NewWithT(t).Expect(huge.Served()).To(BeZero())
	})

	t.Run("statement over the keyless bound", func(t *testing.T) {
		declared := int64(signature.MaxKeylessSBOMLayerBytes)
		e, bundle, huge := hugeBundle(t, declared)
		v := judge(t, e, signing.NewSigstore(t))
		NewWithT(t).Expect(v.Reason).To(HavePrefix(fmt.Sprintf("%s: no SPDX or CycloneDX attestation; bundle %s (layer %s, %d bytes): its statement is more than %d bytes, the bound of a keyless attestation's statement",
			e.digest, bundle, huge.Digest, declared, signature.MaxKeylessSBOMBytes)))
		NewWithT(t).Expect(huge.Served()).To(BeNumerically("<=", declared+8<<20))
	})
}
