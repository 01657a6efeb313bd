package signature_test

import (
	"fmt"
	"testing"

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
