package signature_test

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/signature"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

// newEnvWith is newEnv with a registry started with opts, read by a
// client whose calls each time out after timeout.
func newEnvWith(t *testing.T, timeout time.Duration, opts ...testregistry.Option) *env {
	t.Helper()
	reg := testregistry.Start(t, opts...)
	digest := reg.PushImage(t, "app", "1.0.0")
	client, err := registry.NewScanner(registry.ScannerOptions{}).Client(t.Context(), registry.Access{Timeout: timeout})
	if err != nil {
		t.Fatalf("making a registry client: %v", err)
	}
	return &env{reg: reg, client: client, image: reg.Image("app"), digest: digest}
}

// hundredMB is the size of the attestation a hostile registry serves.
const hundredMB = 100 << 20

// TestAttestationOf100MB serves a 100 MB attestation among the digest's
// referrers and at its .att tag. Declared as 100 MB, it is skipped unread
// and the SBOM beside it counts; declared as 1 KB and served as 100 MB,
// the check fails once it has read past the declared size. Either way,
// at most a few MB leave the registry, within seconds.
func TestAttestationOf100MB(t *testing.T) {
	key := signing.NewKey(t)
	req := signature.Requirements{SBOM: true}
	for name, declared := range map[string]int64{"declared": hundredMB, "declared as 1 KB": 1 << 10} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			huge := testregistry.NewHugeBlob(t, hundredMB)
			e := newEnvWith(t, 10*time.Second, testregistry.WithWrap(huge.Wrap))
			subject, err := e.reg.Get("app", e.digest)
			g.Expect(err).NotTo(HaveOccurred())
			e.reg.PushManifest(t, "app", "", testregistry.OneLayer(signature.BundleArtifactType, signature.BundleArtifactType, declared, huge.Digest, &subject.Descriptor))
			e.reg.PushManifest(t, "app", signature.AttestationTag(e.digest), testregistry.OneLayer("application/vnd.oci.image.config.v1+json", signature.DSSEMediaType, declared, huge.Digest, nil))
			key.Attest(t, e.reg, "app", e.digest, signing.SPDXDocument, signing.SPDX)

			start := time.Now()
			v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, compile(t, keySpec(t, key)), req, time.Now())
			g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
			g.Expect(huge.Served()).To(BeNumerically("<", 8<<20), "bytes of the 100 MB attestation served")
			if declared == hundredMB {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(v.Passed).To(BeTrue(), v.Reason)
				g.Expect(huge.Served()).To(BeZero())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(huge.Digest.String())))
		})
	}
}

// TestAttestationsPastTheBounds fills the referrers with a bundle larger
// than MaxSignatureBytes: it is skipped unread, and the attestation after
// it counts. Past MaxSignatures bundles, the rest are not read: a
// registry listing 10,000 attestations of one digest among its referrers
// has it judged on the first 16, and a .att manifest of 10,000 layers (3
// MB, over MaxSignatureBytes) is not read past its manifest: the SBOM
// last in each does not count, and none of the manifest's layers is
// fetched (go-containerregistry parsed the manifest again for each layer
// read: seconds, past the check's deadline under the race detector). The
// blob count says so whatever the machine's load; a wall-clock bound here
// failed under make stress.
func TestAttestationsPastTheBounds(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t)
	key := signing.NewKey(t)
	req := signature.Requirements{SBOM: true}
	signing.PushLargeBundle(t, e.reg, "app", e.digest, 2*signature.MaxSignatureBytes)
	key.Attest(t, e.reg, "app", e.digest, signing.SPDXDocument, signing.SPDX)
	v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, compile(t, keySpec(t, key)), req, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Passed).To(BeTrue(), v.Reason)

	const many = 10_000
	var sbomReferrer atomic.Value
	sbomReferrer.Store("")
	e = newEnvWith(t, 10*time.Second, testregistry.WithWrap(func(store http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			testregistry.RepeatReferrers(many, func(string) bool { return true }, sbomReferrer.Load().(string))(store).ServeHTTP(w, req)
		})
	}))
	key.Attest(t, e.reg, "app", e.digest, signing.VulnsV02, signing.Scan(time.Now(), nil))
	sbomReferrer.Store(key.Attest(t, e.reg, "app", e.digest, signing.SPDXDocument, signing.SPDX))
	key.AttestTag(t, e.reg, "app", e.digest, signing.VulnsV02, signing.Scan(time.Now(), nil))
	key.AttestTag(t, e.reg, "app", e.digest, signing.SPDXDocument, signing.SPDX)
	att, err := e.reg.Get("app", signature.AttestationTag(e.digest))
	g.Expect(err).NotTo(HaveOccurred())
	manifest, err := v1.ParseManifest(bytes.NewReader(att.Manifest))
	g.Expect(err).NotTo(HaveOccurred())
	scan, sbom := manifest.Layers[0], manifest.Layers[1]
	manifest.Layers = append(slices.Repeat([]v1.Descriptor{scan}, many-1), sbom)
	e.reg.PushManifest(t, "app", signature.AttestationTag(e.digest), manifest)

	e.reg.ResetCounts()
	v, err = signature.Attestations(t.Context(), e.client, e.image, e.digest, compile(t, keySpec(t, key)), req, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Passed).To(BeFalse())
	g.Expect(v.Reason).To(ContainSubstring("no SPDX or CycloneDX attestation"))
	c := e.reg.Counts()
	g.Expect(c.Referrers).To(Equal(1))
	// 16 bundles, and the .att tag; the bundles' blobs only, none of the
	// .att manifest's layers.
	g.Expect(c.ManifestGet).To(BeNumerically("<=", signature.MaxSignatures+1))
	g.Expect(c.BlobGet).To(BeNumerically("<=", signature.MaxSignatures))
}

// TestAttestationsOfASlowStore reads attestations from a registry that
// never answers for them, and from one that answers each of its 16
// bundles just within the client's one-second timeout: either way, the
// check ends with an error at that one second, not at 16 of them. So does
// the signature check.
func TestAttestationsOfASlowStore(t *testing.T) {
	const timeout = time.Second
	key := signing.NewKey(t)
	req := signature.Requirements{SBOM: true}
	attTag := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ".att") }
	var imageDigest atomic.Value
	bundles := func(r *http.Request) bool {
		d, _ := imageDigest.Load().(string)
		return strings.Contains(r.URL.Path, "/manifests/sha256:") && !strings.HasSuffix(r.URL.Path, d)
	}
	for name, c := range map[string]struct {
		slow  func(*http.Request) bool
		delay time.Duration
	}{
		"the .att tag never answers":       {slow: attTag},
		"each bundle answers in 0.4 s":     {slow: bundles, delay: 400 * time.Millisecond},
		"the referrers list never answers": {slow: func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/referrers/") }},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnvWith(t, timeout, testregistry.WithWrap(testregistry.SlowFor(c.slow, c.delay)))
			imageDigest.Store(e.digest)
			for range signature.MaxSignatures {
				key.Attest(t, e.reg, "app", e.digest, signing.SPDXDocument, signing.SPDX)
			}
			policy := compile(t, keySpec(t, key))
			start := time.Now()
			_, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, policy, req, time.Now())
			g.Expect(time.Since(start)).To(BeNumerically("<", timeout+2*time.Second))
			g.Expect(err).To(MatchError(ContainSubstring("the attestations of " + e.digest + " not read within 1s")))
			g.Expect(err).To(MatchError(registry.ErrTransient))

			if c.delay == 0 && name != "the referrers list never answers" {
				return
			}
			v, err := signature.NewVerifier(signature.Options{})
			g.Expect(err).NotTo(HaveOccurred())
			start = time.Now()
			_, err = v.Verify(t.Context(), e.client, e.image, e.digest, policy, "scan")
			g.Expect(time.Since(start)).To(BeNumerically("<", timeout+2*time.Second))
			g.Expect(err).To(MatchError(ContainSubstring("the signatures of " + e.digest + " not read within 1s")))
		})
	}
}

// fiftyMB is the size of the manifests a hostile registry serves.
const fiftyMB = 50 << 20

// TestAttestationManifestsOf50MB serves a 50 MB .att manifest, and a 50
// MB referrers index, for one image: reading its attestations fails at
// registry.MaxManifestBytes within a second or two, having taken a few
// MB of the registry's answer, while the attestations of another image
// of the same registry, judged at the same time, pass.
func TestAttestationManifestsOf50MB(t *testing.T) {
	key := signing.NewKey(t)
	req := signature.Requirements{SBOM: true}
	for name, hostile := range map[string]func(r *http.Request) bool{
		"the .att manifest":   func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ".att") },
		"the referrers index": func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/referrers/") },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var served atomic.Int64
			e := newEnvWith(t, 30*time.Second, testregistry.WithWrap(func(store http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/v2/app/") || !hostile(r) {
						store.ServeHTTP(w, r)
						return
					}
					w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
					n, err := w.Write([]byte(`{"schemaVersion":2,"manifests":[`))
					served.Add(int64(n))
					entry := []byte(`{"mediaType":"application/vnd.oci.image.manifest.v1+json","size":1,"digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000"},`)
					for sent := n; err == nil && sent < fiftyMB; sent += n {
						n, err = w.Write(entry)
						served.Add(int64(n))
					}
				})
			}))
			key.AttestTag(t, e.reg, "app", e.digest, signing.SPDXDocument, signing.SPDX)
			other := e.reg.PushImage(t, "other", "1.0.0")
			key.Attest(t, e.reg, "other", other, signing.SPDXDocument, signing.SPDX)
			policy := compile(t, keySpec(t, key))

			otherDone := make(chan signature.AttestationVerdict, 1)
			go func() {
				v, _ := signature.Attestations(t.Context(), e.client, e.reg.Image("other"), other, policy, req, time.Now())
				otherDone <- v
			}()
			start := time.Now()
			_, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, policy, req, time.Now())
			g.Expect(time.Since(start)).To(BeNumerically("<", 3*time.Second))
			g.Expect(err).To(MatchError(registry.ErrManifestTooLarge))
			g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("is more than %d bytes", registry.MaxManifestBytes))))
			g.Expect(served.Load()).To(BeNumerically("<", registry.MaxManifestBytes+8<<20), "bytes of the 50 MB answer served")
			g.Eventually(otherDone).WithTimeout(5 * time.Second).Should(Receive(HaveField("Passed", BeTrue())))
		})
	}
}
