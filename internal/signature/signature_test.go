package signature_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/signature"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

const (
	githubIssuer = "https://token.actions.githubusercontent.com"
	releaseFlow  = "https://github.com/acme/agent/.github/workflows/release.yaml@refs/tags/v1.0.0"
)

// env is a registry with one image pushed and a client to read it.
type env struct {
	reg    *testregistry.Registry
	client *registry.Client
	image  string
	digest string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	reg := testregistry.Start(t)
	digest := reg.PushImage(t, "app", "1.0.0")
	client, err := registry.NewScanner(registry.ScannerOptions{}).Client(t.Context(), registry.Access{})
	if err != nil {
		t.Fatalf("making a registry client: %v", err)
	}
	return &env{reg: reg, client: client, image: reg.Image("app"), digest: digest}
}

func compile(t *testing.T, spec signature.Spec) signature.Policy {
	t.Helper()
	p, err := signature.Compile(spec)
	if err != nil {
		t.Fatalf("compiling %+v: %v", spec, err)
	}
	return p
}

func keySpec(t *testing.T, keys ...*signing.Key) signature.Spec {
	data := map[string][]byte{"README": []byte("not a key")}
	for i, k := range keys {
		data[string(rune('a'+i))+".pub"] = k.PublicPEM(t)
	}
	return signature.Spec{Provider: signature.Cosign, Keys: data}
}

func keylessSpec(t *testing.T, s *signing.Sigstore, subject string) signature.Spec {
	return signature.Spec{
		Provider:    signature.Cosign,
		Identities:  []signature.Identity{{Issuer: "^" + githubIssuer + "$", Subject: subject}},
		TrustedRoot: s.TrustedRoot(t),
	}
}

func verify(t *testing.T, e *env, v *signature.Verifier, p signature.Policy) signature.Judged {
	t.Helper()
	return verifyIn(t, e, v, p, "scan 1")
}

// verifyIn verifies e's digest in round.
func verifyIn(t *testing.T, e *env, v *signature.Verifier, p signature.Policy, round string) signature.Judged {
	t.Helper()
	j, err := v.Verify(t.Context(), e.client, e.image, e.digest, p, round)
	if err != nil {
		t.Fatalf("verifying %s@%s: %v", e.image, e.digest, err)
	}
	return j
}

func newVerifier(t *testing.T, clock clock.PassiveClock) *signature.Verifier {
	t.Helper()
	v, err := signature.NewVerifier(signature.Options{Clock: clock, RecheckAfter: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestKeySignatures(t *testing.T) {
	layouts := map[string]func(k *signing.Key, e *env){
		"cosign 2 .sig tag":  func(k *signing.Key, e *env) { k.SignTag(t, e.reg, "app", e.digest) },
		"cosign 3 referrers": func(k *signing.Key, e *env) { k.SignBundle(t, e.reg, "app", e.digest) },
	}
	for name, sign := range layouts {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t)
			key, other := signing.NewKey(t), signing.NewKey(t)
			sign(key, e)

			j := verify(t, e, newVerifier(t, nil), compile(t, keySpec(t, other, key)))
			g.Expect(j.Verified).To(BeTrue(), j.Detail)

			j = verify(t, e, newVerifier(t, nil), compile(t, keySpec(t, other)))
			g.Expect(j.Verified).To(BeFalse())
			g.Expect(j.Reason).To(Equal(signature.WrongKey), j.Detail)
		})
	}
}

func TestUnsigned(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t)
	j := verify(t, e, newVerifier(t, nil), compile(t, keySpec(t, signing.NewKey(t))))
	g.Expect(j.Verified).To(BeFalse())
	g.Expect(j.Reason).To(Equal(signature.Unsigned))
	g.Expect(j.Detail).To(ContainSubstring(signature.SignatureTag(e.digest)))
}

// TestSignatureOfAnotherImage copies the signatures of a signed image, in
// both layouts, to an unsigned one, as an attacker who can push to the
// repository but holds no key would: they sign the other digest, not
// this one.
func TestSignatureOfAnotherImage(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t)
	key := signing.NewKey(t)
	key.SignTag(t, e.reg, "app", e.digest)
	key.SignBundle(t, e.reg, "app", e.digest)

	unsigned := e.reg.PushImage(t, "app", "1.0.1")
	sigs, err := e.reg.Get("app", signature.SignatureTag(e.digest))
	g.Expect(err).NotTo(HaveOccurred())
	img, err := sigs.Image()
	g.Expect(err).NotTo(HaveOccurred())
	e.reg.Push(t, "app", signature.SignatureTag(unsigned), img)
	key.SignBundleAttachedTo(t, e.reg, "app", e.digest, unsigned)

	j, err := newVerifier(t, nil).Verify(t.Context(), e.client, e.image, unsigned, compile(t, keySpec(t, key)), "scan 1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.Verified).To(BeFalse(), "a signature of %s let %s through", e.digest, unsigned)
	g.Expect(j.Reason).To(Equal(signature.Unsigned), j.Detail)
}

func TestKeylessSignatures(t *testing.T) {
	layouts := map[string]func(s *signing.Sigstore, e *env, subject string){
		"cosign 2 .sig tag": func(s *signing.Sigstore, e *env, subject string) {
			s.SignTag(t, e.reg, "app", e.digest, subject, githubIssuer)
		},
		"cosign 3 referrers": func(s *signing.Sigstore, e *env, subject string) {
			s.SignBundle(t, e.reg, "app", e.digest, subject, githubIssuer)
		},
	}
	for name, sign := range layouts {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t)
			s := signing.NewSigstore(t)
			sign(s, e, releaseFlow)

			j := verify(t, e, newVerifier(t, nil), compile(t, keylessSpec(t, s, `^https://github\.com/acme/agent/\.github/workflows/release\.yaml@refs/tags/v.*$`)))
			g.Expect(j.Verified).To(BeTrue(), j.Detail)

			j = verify(t, e, newVerifier(t, nil), compile(t, keylessSpec(t, s, `^https://github\.com/acme/other/.*$`)))
			g.Expect(j.Reason).To(Equal(signature.IdentityMismatch), j.Detail)

			// The same identity from a Sigstore the spec does not trust.
			j = verify(t, e, newVerifier(t, nil), compile(t, keylessSpec(t, signing.NewSigstore(t), `^https://github\.com/acme/agent/.*$`)))
			g.Expect(j.Reason).To(Equal(signature.UntrustedChain), j.Detail)

			// Keys do not accept a keyless signature.
			j = verify(t, e, newVerifier(t, nil), compile(t, keySpec(t, signing.NewKey(t))))
			g.Expect(j.Reason).To(Equal(signature.WrongKey), j.Detail)
		})
	}
}

func TestVerdictCache(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t)
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	v := newVerifier(t, clock)
	key := signing.NewKey(t)
	policy := compile(t, keySpec(t, key))

	// Unsigned: refused, and the refusal stands without a request.
	e.reg.ResetCounts()
	j := verify(t, e, v, policy)
	g.Expect(j.Reason).To(Equal(signature.Unsigned))
	g.Expect(j.RecheckAt).To(Equal(clock.Now().Add(10 * time.Minute)))
	g.Expect(e.reg.Counts().Total).To(BeNumerically(">", 0))

	key.SignTag(t, e.reg, "app", e.digest)
	e.reg.ResetCounts()
	clock.SetTime(clock.Now().Add(9 * time.Minute))
	j = verify(t, e, v, policy)
	g.Expect(j.Cached).To(BeTrue())
	g.Expect(j.Verified).To(BeFalse())
	g.Expect(e.reg.Counts().Total).To(BeZero())

	// Once the refusal is due for a recheck, the signature pushed since is
	// found.
	clock.SetTime(clock.Now().Add(time.Minute))
	j = verify(t, e, v, policy)
	g.Expect(j.Cached).To(BeFalse())
	g.Expect(j.Verified).To(BeTrue(), j.Detail)

	// A verified digest stays verified without a request, however late.
	e.reg.ResetCounts()
	clock.SetTime(clock.Now().Add(1000 * time.Hour))
	j = verify(t, e, v, policy)
	g.Expect(j.Cached).To(BeTrue())
	g.Expect(j.Verified).To(BeTrue())
	g.Expect(e.reg.Counts().Total).To(BeZero())

	// Another key is another policy: no verdict of the old one applies.
	j = verify(t, e, v, compile(t, keySpec(t, signing.NewKey(t))))
	g.Expect(j.Cached).To(BeFalse())
	g.Expect(j.Reason).To(Equal(signature.WrongKey))
}

// TestRefusalEndsWithTheRound signs a digest after it was refused: the
// refusal stands within its round (the evaluations between two scans),
// and the next round (a scan, a requested reconcile) reads the
// signatures again, long before the recheck time.
func TestRefusalEndsWithTheRound(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t)
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	v := newVerifier(t, clock)
	key := signing.NewKey(t)
	policy := compile(t, keySpec(t, key))

	j := verifyIn(t, e, v, policy, "scan 1")
	g.Expect(j.Reason).To(Equal(signature.Unsigned))
	key.SignBundle(t, e.reg, "app", e.digest)

	e.reg.ResetCounts()
	j = verifyIn(t, e, v, policy, "scan 1")
	g.Expect(j.Cached).To(BeTrue())
	g.Expect(j.Verified).To(BeFalse())
	g.Expect(e.reg.Counts().Total).To(BeZero())

	j = verifyIn(t, e, v, policy, "scan 2")
	g.Expect(j.Cached).To(BeFalse())
	g.Expect(j.Verified).To(BeTrue(), j.Detail)

	// A verified digest stays verified in every round.
	e.reg.ResetCounts()
	j = verifyIn(t, e, v, policy, "scan 3")
	g.Expect(j.Cached).To(BeTrue())
	g.Expect(e.reg.Counts().Total).To(BeZero())
}

func TestCompileRefusesBadSpecs(t *testing.T) {
	for name, spec := range map[string]signature.Spec{
		"no key in the secret":   {Keys: map[string][]byte{"key": []byte("x")}},
		"a key that is not one":  {Keys: map[string][]byte{"cosign.pub": []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")}},
		"keyless, no identity":   {},
		"a bad regexp":           {Identities: []signature.Identity{{Issuer: "(", Subject: ".*"}}},
		"an empty subject":       {Identities: []signature.Identity{{Issuer: ".*"}}},
		"a trusted root garbled": {Identities: []signature.Identity{{Issuer: ".*", Subject: ".*"}}, TrustedRoot: []byte("{")},
		"an unknown provider":    {Provider: "gpg"},
		"notation, no policy":    {Provider: signature.Notation, Keys: map[string][]byte{"ca.crt": []byte("x")}},
		"notation, bad policy":   {Provider: signature.Notation, Keys: map[string][]byte{signature.TrustPolicyKey: []byte(`{"version":"9"}`), "ca.crt": signing.NotationRSA().RootPEM()}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := signature.Compile(spec)
			NewWithT(t).Expect(err).To(MatchError(signature.ErrInvalidSpec))
		})
	}
}

func TestPublicSigstoreIsTheDefaultRoot(t *testing.T) {
	_, err := signature.Compile(signature.Spec{Identities: []signature.Identity{{Issuer: ".*", Subject: ".*"}}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

func notationSpec(ca *signing.NotationCA, trustedIdentities ...string) signature.Spec {
	if len(trustedIdentities) == 0 {
		trustedIdentities = []string{"*"}
	}
	return signature.Spec{Provider: signature.Notation, Keys: map[string][]byte{
		signature.TrustPolicyKey: signing.TrustPolicy(trustedIdentities...),
		"ca.crt":                 ca.RootPEM(),
	}}
}

func TestNotationSignatures(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t)
	trusted := signing.NotationRSA()

	j := verify(t, e, newVerifier(t, nil), compile(t, notationSpec(trusted)))
	g.Expect(j.Reason).To(Equal(signature.Unsigned), j.Detail)

	trusted.Sign(t, e.reg, "app", e.digest)
	j = verify(t, e, newVerifier(t, nil), compile(t, notationSpec(trusted)))
	g.Expect(j.Verified).To(BeTrue(), j.Detail)

	j = verify(t, e, newVerifier(t, nil), compile(t, notationSpec(trusted, "x509.subject: C=US, ST=WA, L=Seattle, O=Notary, CN=Someone Else")))
	g.Expect(j.Reason).To(Equal(signature.IdentityMismatch), j.Detail)

	j = verify(t, e, newVerifier(t, nil), compile(t, notationSpec(signing.NotationEC())))
	g.Expect(j.Reason).To(Equal(signature.UntrustedChain), j.Detail)
}
