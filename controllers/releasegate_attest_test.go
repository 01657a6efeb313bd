package controllers

import (
	"context"
	"os"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

const (
	githubBuilder = "https://github.com/actions/runner/github-hosted"
	agentSource   = "https://github.com/acme/agent"
)

// attestGate creates a ReleaseGate over the policies labelled stage=prod
// that requires provenance from acme/agent's tags, an SBOM and a scan with
// nothing above HIGH, all signed with key.
func attestGate(t *testing.T, ns string, key *signing.Key) *uprevv1.ReleaseGate {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cosign-keys"}, Data: map[string][]byte{"cosign.pub": key.PublicPEM(t)}}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatalf("creating Secret: %v", err)
	}
	rg := &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "supply-chain"},
		Spec: uprevv1.ReleaseGateSpec{
			PolicySelector: metav1.LabelSelector{MatchLabels: map[string]string{"stage": "prod"}},
			Verify:         &sourcev1.OCIRepositoryVerification{Provider: "cosign", SecretRef: &meta.LocalObjectReference{Name: "cosign-keys"}},
			Attestations: &uprevv1.Attestations{
				SLSAProvenance:  &uprevv1.SLSAProvenance{BuilderID: githubBuilder, SourceRepository: agentSource, WorkflowRef: "^refs/tags/v"},
				SBOM:            true,
				Vulnerabilities: &uprevv1.Vulnerabilities{MaxSeverity: "HIGH", MaxAge: "168h"},
			},
		},
	}
	if err := k8s.Create(ctx, rg); err != nil {
		t.Fatalf("creating ReleaseGate: %v", err)
	}
	return rg
}

func TestAttestationsHoldVersionsAndLetThemThroughWhenAttested(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	key := signing.NewKey(t)
	clean := signing.Scan(testClock.Now().Add(-time.Hour), map[string]string{"CVE-2026-1": "HIGH"})
	// release pushes tag, signs it and attests its provenance, its SBOM
	// (when sbom) and scan, as a release workflow does.
	release := func(tag string, provenance []byte, sbom bool, scan []byte) string {
		d := reg.PushImage(t, "acme/agent", tag)
		key.SignBundle(t, reg, "acme/agent", d)
		key.Attest(t, reg, "acme/agent", d, signing.SLSAProvenanceV1, provenance)
		if sbom {
			key.Attest(t, reg, "acme/agent", d, signing.SPDXDocument, signing.SPDX)
		}
		key.Attest(t, reg, "acme/agent", d, signing.VulnsV02, scan)
		return d
	}
	good := signing.ProvenanceV1(githubBuilder, agentSource, "refs/tags/v1.0.0")
	d100 := release("1.0.0", good, true, clean)
	d110 := release("1.1.0", signing.ProvenanceV1("https://evil.example/builder", agentSource, "refs/tags/v1.1.0"), true, clean)
	d120 := release("1.2.0", signing.ProvenanceV1(githubBuilder, "https://github.com/evil/fork", "refs/tags/v1.2.0"), true, clean)
	d130 := release("1.3.0", good, false, clean)
	d140 := release("1.4.0", good, true, signing.Scan(testClock.Now().Add(-time.Hour), map[string]string{"CVE-2026-9": "CRITICAL"}))
	d150 := release("1.5.0", good, true, signing.Scan(testClock.Now().Add(-30*24*time.Hour), nil))
	rg := attestGate(t, ns, key)
	newRepository(t, ns, reg.Image("acme/agent"))
	pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"), prodStage, func(p *imagev1.ImagePolicy) {
		p.Spec.DigestReflectionPolicy = imagev1.ReflectIfNotPresent
	})

	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.0.0"), c.Message)
		g.Expect(pol.Status.LatestRef.Digest).To(Equal(d100))
		g.Expect(c.Message).To(ContainSubstring("1.5.0 refused: vulnerabilities: " + d150))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rg), rg)).To(Succeed())
		g.Expect(rg.Status.Policies).To(HaveLen(1))
		w := rg.Status.Policies[0].Waiting
		g.Expect(w).To(HaveLen(5))
		for i, want := range []string{
			"vulnerabilities: " + d150 + ": the newest scan, of",
			"vulnerabilities: " + d140 + ": 1 finding(s) above HIGH: CVE-2026-9",
			"sbom: " + d130 + ": no SPDX or CycloneDX attestation",
			"slsaProvenance: " + d120 + `: built from "https://github.com/evil/fork"`,
			"slsaProvenance: " + d110 + `: built by "https://evil.example/builder"`,
		} {
			g.Expect(w[i].Gate).To(Equal("attestations"))
			g.Expect(w[i].Reason).To(HavePrefix(want))
			g.Expect(w[i].EligibleAt).To(BeNil())
		}
	}).Should(Succeed())

	// A fresh, clean scan of 1.5.0 is attested later: a requested
	// reconcile takes it within seconds.
	key.Attest(t, reg, "acme/agent", d150, signing.VulnsV02, signing.Scan(testClock.Now(), nil))
	requestReconcile(t, pol)
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.5.0"), c.Message)
		g.Expect(pol.Status.LatestRef.Digest).To(Equal(d150))
	}).WithTimeout(5 * time.Second).Should(Succeed())
}

func TestAttestationsNeedVerify(t *testing.T) {
	ns := newNamespace(t)
	rg := &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unsigned-attestations"},
		Spec:       uprevv1.ReleaseGateSpec{Attestations: &uprevv1.Attestations{SBOM: true}},
	}
	err := k8s.Create(context.Background(), rg)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("spec.attestations needs spec.verify")))
}

// TestSupplyChainExampleIsAdmitted creates the ReleaseGate of
// examples/supply-chain on the apiserver, whose validation (CEL: verify
// beside attestations, maxSeverity's values) it passes.
func TestSupplyChainExampleIsAdmitted(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("../examples/supply-chain/releasegate.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	var rg uprevv1.ReleaseGate
	g.Expect(yaml.UnmarshalStrict(data, &rg)).To(Succeed())
	g.Expect(rg.Spec.Attestations).NotTo(BeNil())
	rg.Namespace = newNamespace(t)
	g.Expect(k8s.Create(context.Background(), &rg)).To(Succeed())
}
