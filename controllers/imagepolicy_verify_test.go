package controllers

import (
	"context"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

// newVerifyGate creates a ReleaseGate that verifies the signatures of the
// policies labelled stage=prod with verify, and the Secrets it names,
// with data.
func newVerifyGate(t *testing.T, ns string, verify *sourcev1.OCIRepositoryVerification, secrets map[string]map[string][]byte) *uprevv1.ReleaseGate {
	t.Helper()
	for name, data := range secrets {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
		if err := k8s.Create(context.Background(), s); err != nil {
			t.Fatalf("creating Secret %s: %v", name, err)
		}
	}
	rg := &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "signed"},
		Spec: uprevv1.ReleaseGateSpec{
			PolicySelector: metav1.LabelSelector{MatchLabels: map[string]string{"stage": "prod"}},
			Verify:         verify,
		},
	}
	if err := k8s.Create(context.Background(), rg); err != nil {
		t.Fatalf("creating ReleaseGate: %v", err)
	}
	return rg
}

// keyGate verifies with the public key of key.
func keyGate(t *testing.T, ns string, key *signing.Key) *uprevv1.ReleaseGate {
	return newVerifyGate(t, ns,
		&sourcev1.OCIRepositoryVerification{Provider: "cosign", SecretRef: &meta.LocalObjectReference{Name: "cosign-keys"}},
		map[string]map[string][]byte{"cosign-keys": {"cosign.pub": key.PublicPEM(t)}})
}

func TestVerifyTakesTheNewestSignedVersion(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	key := signing.NewKey(t)
	d100 := reg.PushImage(t, "acme/agent", "1.0.0")
	d110 := reg.PushImage(t, "acme/agent", "1.1.0")
	d120 := reg.PushImage(t, "acme/agent", "1.2.0")
	key.SignTag(t, reg, "acme/agent", d100)
	key.SignBundle(t, reg, "acme/agent", d110)
	rg := keyGate(t, ns, key)
	newRepository(t, ns, reg.Image("acme/agent"))
	pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"), prodStage, func(p *imagev1.ImagePolicy) {
		p.Spec.DigestReflectionPolicy = imagev1.ReflectIfNotPresent
	})

	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.1.0"), "1.2.0 is unsigned, 1.1.0 is signed: %s", c.Message)
		g.Expect(pol.Status.LatestRef.Digest).To(Equal(d110))
		g.Expect(c.Message).To(ContainSubstring("1.2.0 refused: unsigned (ReleaseGate signed"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg)).To(Succeed())
		g.Expect(rg.Status.Policies).To(ConsistOf(uprevv1.GatedPolicy{
			Name:    "agent",
			Latest:  &uprevv1.GatedVersion{Tag: "1.1.0", Digest: d110, SignedBy: "key cosign.pub"},
			Waiting: []uprevv1.WaitingVersion{{Tag: "1.2.0", Gate: "verify", Reason: "unsigned"}},
		}))
	}).Should(Succeed())

	// Signed later: taken once the refusal is due for a recheck, when the
	// policy runs again by itself (here asked, as the clock is moved).
	key.SignTag(t, reg, "acme/agent", d120)
	testClock.Advance(11 * time.Minute)
	requestReconcile(t, pol)
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.2.0"), c.Message)
		g.Expect(pol.Status.LatestRef.Digest).To(Equal(d120))
	}).Should(Succeed())
}

func TestVerifyKeylessWithAPrivateSigstore(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	sigstore := signing.NewSigstore(t)
	const issuer = "https://token.actions.githubusercontent.com"
	d100 := reg.PushImage(t, "acme/agent", "1.0.0")
	d110 := reg.PushImage(t, "acme/agent", "1.1.0")
	sigstore.SignBundle(t, reg, "acme/agent", d100, "https://github.com/acme/agent/.github/workflows/release.yaml@refs/tags/v1.0.0", issuer)
	sigstore.SignTag(t, reg, "acme/agent", d110, "https://github.com/evil/fork/.github/workflows/release.yaml@refs/tags/v1.1.0", issuer)
	rg := newVerifyGate(t, ns, &sourcev1.OCIRepositoryVerification{
		Provider: "cosign",
		MatchOIDCIdentity: []sourcev1.OIDCIdentityMatch{{
			Issuer:  "^https://token.actions.githubusercontent.com$",
			Subject: `^https://github.com/acme/agent/.github/workflows/release.yaml@refs/tags/v.*$`,
		}},
		TrustedRootSecretRef: &meta.LocalObjectReference{Name: "sigstore-root"},
	}, map[string]map[string][]byte{"sigstore-root": {"trusted_root.json": sigstore.TrustedRoot(t)}})
	newRepository(t, ns, reg.Image("acme/agent"))
	pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"), prodStage)

	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.0.0"), c.Message)
		g.Expect(c.Message).To(ContainSubstring("1.1.0 refused: identity mismatch"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg)).To(Succeed())
		g.Expect(rg.Status.Policies).To(HaveLen(1))
		g.Expect(rg.Status.Policies[0].Waiting).To(ConsistOf(uprevv1.WaitingVersion{Tag: "1.1.0", Gate: "verify", Reason: "identity mismatch"}))
		g.Expect(rg.Status.Policies[0].Latest).To(HaveField("SignedBy",
			"keyless identity https://github.com/acme/agent/.github/workflows/release.yaml@refs/tags/v1.0.0, issuer "+issuer))
	}).Should(Succeed())
}

func TestVerifyWithABadKeyKeepsTheLatestRef(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushImage(t, "acme/agent", "1.0.0")
	rg := newVerifyGate(t, ns,
		&sourcev1.OCIRepositoryVerification{Provider: "cosign", SecretRef: &meta.LocalObjectReference{Name: "cosign-keys"}},
		map[string]map[string][]byte{"cosign-keys": {"cosign.pub": []byte("-----BEGIN PUBLIC KEY-----\nc2VjcmV0\n-----END PUBLIC KEY-----\n")}})
	newRepository(t, ns, reg.Image("acme/agent"))
	pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"), prodStage)

	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(BeEmpty())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.GateInvalidReason))
		g.Expect(c.Message).To(ContainSubstring("spec.verify: invalid signature verification spec: public key cosign.pub"))
		g.Expect(c.Message).NotTo(ContainSubstring("c2VjcmV0"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, rg)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.GateInvalidReason))
	}).Should(Succeed())
}

func TestVerifyNotationTrustedAndUntrusted(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	signing.NotationRSA().Sign(t, reg, "acme/agent", reg.PushImage(t, "acme/agent", "1.0.0"))
	signing.NotationEC().Sign(t, reg, "acme/agent", reg.PushImage(t, "acme/agent", "1.1.0"))
	rg := newVerifyGate(t, ns,
		&sourcev1.OCIRepositoryVerification{Provider: "notation", SecretRef: &meta.LocalObjectReference{Name: "notation"}},
		map[string]map[string][]byte{"notation": {"trustpolicy.json": signing.TrustPolicy("*"), "ca.crt": signing.NotationRSA().RootPEM()}})
	newRepository(t, ns, reg.Image("acme/agent"))
	pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"), prodStage)

	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.0.0"), c.Message)
		g.Expect(c.Message).To(ContainSubstring("1.1.0 refused: untrusted chain"))
	}).Should(Succeed())
	// The gate says which certificate signed what it let through.
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg)).To(Succeed())
		g.Expect(rg.Status.Policies).To(HaveLen(1))
		g.Expect(rg.Status.Policies[0].Latest).To(HaveField("SignedBy", MatchRegexp(`^certificate .*CN=`)))
	}).Should(Succeed())
}

// TestVerifyLateSignatureIsSeenAtOnce pushes versions first and signs them
// later, as CI does: the refusal ends at a requested reconcile of the
// policy, and at the next scan of its repository, each within seconds and
// long before the 10 minutes a refusal may stand (the clock stays).
func TestVerifyLateSignatureIsSeenAtOnce(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	key := signing.NewKey(t)
	key.SignTag(t, reg, "acme/agent", reg.PushImage(t, "acme/agent", "1.0.0"))
	d110 := reg.PushImage(t, "acme/agent", "1.1.0")
	keyGate(t, ns, key)
	repo := newRepository(t, ns, reg.Image("acme/agent"))
	pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"), prodStage)
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.0.0"), c.Message)
		g.Expect(c.Message).To(ContainSubstring("1.1.0 refused: unsigned"))
	}).Should(Succeed())

	// Signed in the .sig layout, then a reconcile of the policy is asked.
	key.SignTag(t, reg, "acme/agent", d110)
	requestReconcile(t, pol)
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.1.0"), c.Message)
	}).WithTimeout(5 * time.Second).Should(Succeed())

	// A new version, found by a scan and refused; signed in the referrers
	// layout; the next scan (here asked of the repository) lets it through.
	d120 := reg.PushImage(t, "acme/agent", "1.2.0")
	requestReconcile(t, repo)
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.1.0"), c.Message)
		g.Expect(c.Message).To(ContainSubstring("1.2.0 refused: unsigned"))
	}).Should(Succeed())
	key.SignBundle(t, reg, "acme/agent", d120)
	requestReconcile(t, repo)
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.2.0"), c.Message)
	}).WithTimeout(5 * time.Second).Should(Succeed())
}
