package signature_test

import (
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/signature"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

// twentyMB is the size of the SBOM of a large image.
const twentyMB = 20 << 20

// TestLargeSBOM attests a 20 MB SPDX SBOM with a cosign key, in the
// cosign 3 layout (a bundle among the referrers) and in cosign 2's (a
// layer of the .att tag): either is read as a stream and counts, and
// judging it allocates a few MB, not the 20 MB document (let alone its
// base64 and its decoded form, as a whole-document decode would). The
// same SBOM, altered after it was signed, does not count, and the
// refusal says why.
func TestLargeSBOM(t *testing.T) {
	sbom := signing.LargeSPDX(twentyMB)
	req := signature.Requirements{SBOM: true}
	for name, attest := range map[string]func(e *env, k *signing.Key){
		"bundle":   func(e *env, k *signing.Key) { k.Attest(t, e.reg, "app", e.digest, signing.SPDXDocument, sbom) },
		".att tag": func(e *env, k *signing.Key) { k.AttestTag(t, e.reg, "app", e.digest, signing.SPDXDocument, sbom) },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t)
			key := signing.NewKey(t)
			attest(e, key)
			policy := compile(t, keySpec(t, key))

			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, policy, req, time.Now())
			runtime.ReadMemStats(&after)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.Passed).To(BeTrue(), v.Reason)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("judging a %d-byte SBOM allocated %d bytes (registry and client together)", len(sbom), allocated)
			g.Expect(allocated).To(BeNumerically("<", 4<<20), "bytes allocated while judging a 20 MB SBOM")
		})
	}

	t.Run("altered after signing", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t)
		key := signing.NewKey(t)
		altered := key.AttestAltered(t, e.reg, "app", e.digest, signing.SPDXDocument, sbom)
		v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, compile(t, keySpec(t, key)), req, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.Passed).To(BeFalse())
		g.Expect(v.Type).To(Equal(signature.SBOMAttestation))
		g.Expect(v.Reason).To(HavePrefix(e.digest + ": no SPDX or CycloneDX attestation; bundle " + altered))
		g.Expect(v.Reason).To(ContainSubstring("is not signed by a key of the secret"))
	})
}
