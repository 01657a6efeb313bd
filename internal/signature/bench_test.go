package signature_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/signature"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

// BenchmarkVerify100Candidates verifies 100 signed versions of an image
// in the in-process registry, as a first scan of a ReleaseGate with
// spec.verify does when every candidate has to be judged, then judges
// them again as a second scan with nothing new does. It reports the
// registry requests per candidate of both; the second must make none.
func BenchmarkVerify100Candidates(b *testing.B) {
	for _, layout := range []string{"tag", "bundle", "keyless-bundle"} {
		b.Run(layout, func(b *testing.B) {
			reg := testregistry.Start(b)
			key := signing.NewKey(b)
			sigstore := signing.NewSigstore(b)
			spec := signature.Spec{Keys: map[string][]byte{"cosign.pub": key.PublicPEM(b)}}
			if layout == "keyless-bundle" {
				spec = signature.Spec{
					Identities:  []signature.Identity{{Issuer: "^https://issuer$", Subject: "^release$"}},
					TrustedRoot: sigstore.TrustedRoot(b),
				}
			}
			digests := make([]string, 100)
			for i := range digests {
				digests[i] = reg.PushImage(b, "app", fmt.Sprintf("1.0.%d", i))
				switch layout {
				case "tag":
					key.SignTag(b, reg, "app", digests[i])
				case "bundle":
					key.SignBundle(b, reg, "app", digests[i])
				default:
					sigstore.SignBundle(b, reg, "app", digests[i], "release", "https://issuer")
				}
			}
			client, err := registry.NewScanner(registry.ScannerOptions{}).Client(b.Context(), registry.Access{})
			if err != nil {
				b.Fatal(err)
			}
			policy, err := signature.Compile(spec)
			if err != nil {
				b.Fatal(err)
			}
			image := reg.Image("app")
			var first, second int
			b.ResetTimer()
			for b.Loop() {
				v, err := signature.NewVerifier(signature.Options{})
				if err != nil {
					b.Fatal(err)
				}
				reg.ResetCounts()
				for _, d := range digests {
					j, err := v.Verify(b.Context(), client, image, d, policy, "scan")
					if err != nil || !j.Verified {
						b.Fatalf("verifying %s: %v %s", d, err, j.Detail)
					}
				}
				first = reg.Counts().Total
				reg.ResetCounts()
				for _, d := range digests {
					if j, err := v.Verify(b.Context(), client, image, d, policy, "scan"); err != nil || !j.Cached {
						b.Fatalf("verifying %s again: %v, cached %v", d, err, j.Cached)
					}
				}
				second = reg.Counts().Total
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(digests))/1000, "ms/candidate")
			b.ReportMetric(float64(first)/float64(len(digests)), "requests/candidate")
			b.ReportMetric(float64(second), "requests-second-scan")
			if second != 0 {
				b.Fatalf("the second scan made %d registry requests", second)
			}
		})
	}
}

// BenchmarkAttest100Candidates checks the signature and the provenance,
// SBOM and scan attestations of 100 versions, as a first scan of a
// ReleaseGate with spec.attestations does, then again in the same round,
// as the evaluations before the next scan do. It reports the registry
// requests per candidate of both; the second must make none.
func BenchmarkAttest100Candidates(b *testing.B) {
	reg := testregistry.Start(b)
	key := signing.NewKey(b)
	now := time.Now()
	req := signature.Requirements{
		Provenance:      &signature.ProvenanceRequirement{BuilderID: "https://builder", SourceRepository: "https://github.com/acme/agent"},
		SBOM:            true,
		Vulnerabilities: &signature.VulnerabilityRequirement{MaxSeverity: "HIGH", MaxAge: time.Hour},
	}
	digests := make([]string, 100)
	for i := range digests {
		d := reg.PushImage(b, "app", fmt.Sprintf("1.0.%d", i))
		key.SignBundle(b, reg, "app", d)
		key.Attest(b, reg, "app", d, signing.SLSAProvenanceV1, signing.ProvenanceV1("https://builder", "https://github.com/acme/agent", "refs/tags/v1"))
		key.Attest(b, reg, "app", d, signing.SPDXDocument, signing.SPDX)
		key.Attest(b, reg, "app", d, signing.VulnsV02, signing.Scan(now, nil))
		digests[i] = d
	}
	client, err := registry.NewScanner(registry.ScannerOptions{}).Client(b.Context(), registry.Access{})
	if err != nil {
		b.Fatal(err)
	}
	policy, err := signature.Compile(signature.Spec{Keys: map[string][]byte{"cosign.pub": key.PublicPEM(b)}})
	if err != nil {
		b.Fatal(err)
	}
	image := reg.Image("app")
	judge := func(v *signature.Verifier, d string) (cached bool) {
		j, err := v.Verify(b.Context(), client, image, d, policy, "scan")
		if err != nil || !j.Verified {
			b.Fatalf("verifying %s: %v %s", d, err, j.Detail)
		}
		a, err := v.Attest(b.Context(), client, image, d, policy, req, "scan")
		if err != nil || !a.Verified {
			b.Fatalf("attestations of %s: %v %s", d, err, a.Detail)
		}
		return j.Cached && a.Cached
	}
	var first, second int
	b.ResetTimer()
	for b.Loop() {
		v, err := signature.NewVerifier(signature.Options{})
		if err != nil {
			b.Fatal(err)
		}
		reg.ResetCounts()
		for _, d := range digests {
			judge(v, d)
		}
		first = reg.Counts().Total
		reg.ResetCounts()
		for _, d := range digests {
			if !judge(v, d) {
				b.Fatalf("%s judged again in the same round", d)
			}
		}
		second = reg.Counts().Total
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(digests))/1000, "ms/candidate")
	b.ReportMetric(float64(first)/float64(len(digests)), "requests/candidate")
	b.ReportMetric(float64(second), "requests-same-round")
	if second != 0 {
		b.Fatalf("the same round made %d registry requests", second)
	}
}
