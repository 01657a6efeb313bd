package signature_test

import (
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"

	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/signature"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

// BenchmarkLargeSBOM judges a 20 MB SPDX SBOM attested with a cosign key
// (a referrers bundle of 27 MB) read as a stream, and reports the bytes
// allocated per judgement, the in-process registry's serving included.
// For comparison, whole-document decodes the same bundle as sigstore-go
// does one under MaxSignatureBytes (bundle, then its statement).
func BenchmarkLargeSBOM(b *testing.B) {
	reg := testregistry.Start(b)
	key := signing.NewKey(b)
	digest := reg.PushImage(b, "app", "1.0.0")
	referrer := key.Attest(b, reg, "app", digest, signing.SPDXDocument, signing.LargeSPDX(20<<20))
	client, err := registry.NewScanner(registry.ScannerOptions{}).Client(b.Context(), registry.Access{})
	if err != nil {
		b.Fatal(err)
	}
	policy, err := signature.Compile(signature.Spec{Keys: map[string][]byte{"cosign.pub": key.PublicPEM(b)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := signature.Attestations(b.Context(), client, reg.Image("app"), digest, policy, signature.Requirements{SBOM: true}, time.Now())
			if err != nil || !v.Passed {
				b.Fatalf("%v %s", err, v.Reason)
			}
		}
	})
	desc, err := reg.Get("app", referrer)
	if err != nil {
		b.Fatal(err)
	}
	img, err := desc.Image()
	if err != nil {
		b.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("whole-document", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rc, err := layers[0].Compressed()
			if err != nil {
				b.Fatal(err)
			}
			data := make([]byte, 0, 32<<20)
			for buf := make([]byte, 1<<20); ; {
				n, err := rc.Read(buf)
				data = append(data, buf[:n]...)
				if err != nil {
					break
				}
			}
			_ = rc.Close()
			var bn bundle.Bundle
			if err := bn.UnmarshalJSON(data); err != nil {
				b.Fatal(err)
			}
			env, err := bn.Envelope()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := env.Statement(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLargeKeylessSBOM judges a 12 MB SPDX SBOM attested keyless (a
// referrers bundle of 16 MB with its certificate and log entry), whose
// payload is held while sigstore-go checks it, and reports the bytes
// allocated per judgement, the in-process registry's serving included.
func BenchmarkLargeKeylessSBOM(b *testing.B) {
	reg := testregistry.Start(b)
	s := signing.NewSigstore(b)
	digest := reg.PushImage(b, "app", "1.0.0")
	s.Attest(b, reg, "app", digest, releaseFlow, githubIssuer, signing.SPDXDocument, signing.LargeSPDX(12<<20))
	client, err := registry.NewScanner(registry.ScannerOptions{}).Client(b.Context(), registry.Access{})
	if err != nil {
		b.Fatal(err)
	}
	policy, err := signature.Compile(signature.Spec{
		Provider:    signature.Cosign,
		Identities:  []signature.Identity{{Issuer: "^" + githubIssuer + "$", Subject: releaseIdentity}},
		TrustedRoot: s.TrustedRoot(b),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		v, err := signature.Attestations(b.Context(), client, reg.Image("app"), digest, policy, signature.Requirements{SBOM: true}, time.Now())
		if err != nil || !v.Passed {
			b.Fatalf("%v %s", err, v.Reason)
		}
	}
}
