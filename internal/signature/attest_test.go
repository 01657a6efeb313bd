package signature_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/signature"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

const (
	githubBuilder = "https://github.com/actions/runner/github-hosted"
	agentRepo     = "https://github.com/acme/agent"
)

func TestAttestations(t *testing.T) {
	now := time.Now()
	all := signature.Requirements{
		Provenance:      &signature.ProvenanceRequirement{BuilderID: githubBuilder, SourceRepository: agentRepo, WorkflowRef: `^refs/tags/v`},
		SBOM:            true,
		Vulnerabilities: &signature.VulnerabilityRequirement{MaxSeverity: "HIGH", MaxAge: 24 * time.Hour},
	}
	type attest func(e *env, key *signing.Key)
	good := []attest{
		func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.SLSAProvenanceV1, signing.ProvenanceV1(githubBuilder, agentRepo, "refs/tags/v1.0.0"))
		},
		func(e *env, k *signing.Key) { k.Attest(t, e.reg, "app", e.digest, signing.SPDXDocument, signing.SPDX) },
		func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.VulnsV02, signing.Scan(now.Add(-time.Hour), map[string]string{"CVE-2026-1": "HIGH", "CVE-2026-2": "5.3"}))
		},
	}
	for name, c := range map[string]struct {
		extra    []attest
		skip     int // a good attestation left out, or -1
		otherKey bool
		typ      string
		reason   string
	}{
		"all pass": {skip: -1},
		"provenance v0.2": {skip: 0, extra: []attest{func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.SLSAProvenanceV02, signing.ProvenanceV02(githubBuilder, agentRepo, "refs/tags/v1.0.0"))
		}}},
		"wrong builder": {skip: 0, typ: signature.ProvenanceAttestation, reason: `built by "https://evil.example/builder"`, extra: []attest{func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.SLSAProvenanceV1, signing.ProvenanceV1("https://evil.example/builder", agentRepo, "refs/tags/v1.0.0"))
		}}},
		"wrong source repository": {skip: 0, typ: signature.ProvenanceAttestation, reason: `built from "https://github.com/evil/fork"`, extra: []attest{func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.SLSAProvenanceV1, signing.ProvenanceV1(githubBuilder, "https://github.com/evil/fork", "refs/tags/v1.0.0"))
		}}},
		"a branch, not a tag": {skip: 0, typ: signature.ProvenanceAttestation, reason: `built from ref "refs/heads/main"`, extra: []attest{func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.SLSAProvenanceV1, signing.ProvenanceV1(githubBuilder, agentRepo, "refs/heads/main"))
		}}},
		"no provenance": {skip: 0, typ: signature.ProvenanceAttestation, reason: "no SLSA provenance attestation"},
		"no SBOM":       {skip: 1, typ: signature.SBOMAttestation, reason: "no SPDX or CycloneDX attestation"},
		"CycloneDX": {skip: 1, extra: []attest{func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, "https://cyclonedx.org/bom", []byte(`{"bomFormat":"CycloneDX","specVersion":"1.6"}`))
		}}},
		"no scan": {skip: 2, typ: signature.VulnerabilitiesAttestation, reason: "no vulnerability scan attestation"},
		"a critical finding": {skip: 2, typ: signature.VulnerabilitiesAttestation, reason: "1 finding(s) above HIGH: CVE-2026-9", extra: []attest{func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.VulnsV02, signing.Scan(now.Add(-time.Hour), map[string]string{"CVE-2026-9": "CRITICAL"}))
		}}},
		"a critical CVSS score": {skip: 2, typ: signature.VulnerabilitiesAttestation, reason: "1 finding(s) above HIGH: CVE-2026-8", extra: []attest{func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.VulnsV02, signing.Scan(now.Add(-time.Hour), map[string]string{"CVE-2026-8": "9.8"}))
		}}},
		"a stale scan": {skip: 2, typ: signature.VulnerabilitiesAttestation, reason: "is older than 24h0m0s", extra: []attest{func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.VulnsV02, signing.Scan(now.Add(-48*time.Hour), nil))
		}}},
		"a critical finding not affecting it (OpenVEX)": {skip: 2, extra: []attest{
			func(e *env, k *signing.Key) {
				k.Attest(t, e.reg, "app", e.digest, signature.VulnsV02, signing.Scan(now.Add(-time.Hour), map[string]string{"CVE-2026-9": "CRITICAL"}))
			},
			func(e *env, k *signing.Key) {
				k.Attest(t, e.reg, "app", e.digest, signing.OpenVEX, signing.NotAffected("CVE-2026-9"))
			},
		}},
		"an OpenVEX statement of another CVE": {skip: 2, typ: signature.VulnerabilitiesAttestation, reason: "1 finding(s) above HIGH: CVE-2026-7", extra: []attest{
			func(e *env, k *signing.Key) {
				k.Attest(t, e.reg, "app", e.digest, signature.VulnsV02, signing.Scan(now.Add(-time.Hour), map[string]string{"CVE-2026-7": "CRITICAL"}))
			},
			func(e *env, k *signing.Key) {
				k.Attest(t, e.reg, "app", e.digest, signing.OpenVEX, signing.NotAffected("CVE-2026-9"))
			},
		}},
		"an OpenVEX statement by another key": {skip: 2, typ: signature.VulnerabilitiesAttestation, reason: "1 finding(s) above HIGH: CVE-2026-9", extra: []attest{
			func(e *env, k *signing.Key) {
				k.Attest(t, e.reg, "app", e.digest, signature.VulnsV02, signing.Scan(now.Add(-time.Hour), map[string]string{"CVE-2026-9": "CRITICAL"}))
			},
			func(e *env, _ *signing.Key) {
				signing.NewKey(t).Attest(t, e.reg, "app", e.digest, signing.OpenVEX, signing.NotAffected("CVE-2026-9"))
			},
		}},
		"the newest scan decides": {skip: 2, extra: []attest{
			func(e *env, k *signing.Key) {
				k.Attest(t, e.reg, "app", e.digest, signature.VulnsV02, signing.Scan(now.Add(-2*time.Hour), map[string]string{"CVE-2026-9": "CRITICAL"}))
			},
			func(e *env, k *signing.Key) {
				k.Attest(t, e.reg, "app", e.digest, signature.VulnsV02, signing.Scan(now.Add(-time.Hour), nil))
			},
		}},
		"a clean Trivy scan (cosign vuln/v1)": {skip: 2, extra: []attest{func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.CosignVulnV1, signing.TrivyScan(now.Add(-time.Hour), map[string]string{"CVE-2026-1": "HIGH", "CVE-2026-3": "UNKNOWN"}))
		}}},
		"a critical finding of Trivy (cosign vuln/v1)": {skip: 2, typ: signature.VulnerabilitiesAttestation, reason: "1 finding(s) above HIGH: CVE-2026-9", extra: []attest{func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.CosignVulnV1, signing.TrivyScan(now.Add(-time.Hour), map[string]string{"CVE-2026-9": "CRITICAL", "CVE-2026-1": "HIGH"}))
		}}},
		"a critical finding of Grype (cosign vuln/v1)": {skip: 2, typ: signature.VulnerabilitiesAttestation, reason: "1 finding(s) above HIGH: CVE-2026-9", extra: []attest{func(e *env, k *signing.Key) {
			k.Attest(t, e.reg, "app", e.digest, signature.CosignVulnV1, signing.GrypeScan(now.Add(-time.Hour), map[string]string{"CVE-2026-9": "Critical", "CVE-2026-1": "Negligible"}))
		}}},
		"a stale Trivy scan (cosign vuln/v1)": {skip: 2, typ: signature.VulnerabilitiesAttestation, reason: "is older than 24h0m0s", extra: []attest{func(e *env, k *signing.Key) {
			k.AttestTag(t, e.reg, "app", e.digest, signature.CosignVulnV1, signing.TrivyScan(now.Add(-48*time.Hour), nil))
		}}},
		"a newer clean Trivy scan after an in-toto one with a critical finding": {skip: 2, extra: []attest{
			func(e *env, k *signing.Key) {
				k.Attest(t, e.reg, "app", e.digest, signature.VulnsV02, signing.Scan(now.Add(-2*time.Hour), map[string]string{"CVE-2026-9": "CRITICAL"}))
			},
			func(e *env, k *signing.Key) {
				k.AttestTag(t, e.reg, "app", e.digest, signature.CosignVulnV1, signing.TrivyScan(now.Add(-time.Hour), nil))
			},
		}},
		"a critical Trivy finding not affecting it (OpenVEX)": {skip: 2, extra: []attest{
			func(e *env, k *signing.Key) {
				k.Attest(t, e.reg, "app", e.digest, signature.CosignVulnV1, signing.TrivyScan(now.Add(-time.Hour), map[string]string{"CVE-2026-9": "CRITICAL"}))
			},
			func(e *env, k *signing.Key) {
				k.Attest(t, e.reg, "app", e.digest, signing.OpenVEX, signing.NotAffected("CVE-2026-9"))
			},
		}},
		"provenance in the cosign 2 .att tag": {skip: 0, extra: []attest{func(e *env, k *signing.Key) {
			k.AttestTag(t, e.reg, "app", e.digest, signature.SLSAProvenanceV1, signing.ProvenanceV1(githubBuilder, agentRepo, "refs/tags/v1.0.0"))
		}}},
		"a wrong builder in the .att tag": {skip: 0, typ: signature.ProvenanceAttestation, reason: `built by "https://evil.example/builder"`, extra: []attest{func(e *env, k *signing.Key) {
			k.AttestTag(t, e.reg, "app", e.digest, signature.SLSAProvenanceV1, signing.ProvenanceV1("https://evil.example/builder", agentRepo, "refs/tags/v1.0.0"))
		}}},
		"an .att tag by another key": {skip: 0, typ: signature.ProvenanceAttestation, reason: "no SLSA provenance attestation", extra: []attest{func(e *env, _ *signing.Key) {
			signing.NewKey(t).AttestTag(t, e.reg, "app", e.digest, signature.SLSAProvenanceV1, signing.ProvenanceV1(githubBuilder, agentRepo, "refs/tags/v1.0.0"))
		}}},
		"attested by another key": {skip: -1, otherKey: true, typ: signature.ProvenanceAttestation, reason: "no SLSA provenance attestation"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t)
			key, signer := signing.NewKey(t), signing.NewKey(t)
			if !c.otherKey {
				signer = key
			}
			for i, a := range good {
				if i != c.skip {
					a(e, signer)
				}
			}
			for _, a := range c.extra {
				a(e, signer)
			}
			v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, compile(t, keySpec(t, key)), all, now)
			g.Expect(err).NotTo(HaveOccurred())
			if c.typ == "" {
				g.Expect(v.Passed).To(BeTrue(), v.Reason)
				return
			}
			g.Expect(v.Passed).To(BeFalse())
			g.Expect(v.Type).To(Equal(c.typ))
			g.Expect(v.Reason).To(HavePrefix(e.digest + ": "))
			g.Expect(v.Reason).To(ContainSubstring(c.reason))
		})
	}
}

// TestAttestationsKeyless checks provenance signed keyless, as GitHub
// artifact attestations are: the attestation of another workflow's
// identity does not count.
func TestAttestationsKeyless(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t)
	s := signing.NewSigstore(t)
	req := signature.Requirements{Provenance: &signature.ProvenanceRequirement{BuilderID: githubBuilder, SourceRepository: agentRepo}}
	policy := compile(t, keylessSpec(t, s, `^https://github.com/acme/agent/\.github/workflows/release\.yaml@.*$`))

	s.Attest(t, e.reg, "app", e.digest, "https://github.com/evil/fork/.github/workflows/release.yaml@refs/tags/v1.0.0", githubIssuer,
		signature.SLSAProvenanceV1, signing.ProvenanceV1(githubBuilder, agentRepo, "refs/tags/v1.0.0"))
	v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, policy, req, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Passed).To(BeFalse(), "an attestation by another identity counted")
	g.Expect(v.Reason).To(ContainSubstring("no SLSA provenance attestation"))

	s.Attest(t, e.reg, "app", e.digest, releaseFlow, githubIssuer,
		signature.SLSAProvenanceV1, signing.ProvenanceV1(githubBuilder, agentRepo, "refs/tags/v1.0.0"))
	v, err = signature.Attestations(t.Context(), e.client, e.image, e.digest, policy, req, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Passed).To(BeTrue(), v.Reason)
}

// TestAttestationsKeylessAttTag checks attestations signed keyless in
// cosign 2's sha256-<hex>.att tag (the certificate and Rekor entry in the
// layer's annotations): one by another workflow, or by the right workflow
// name under another issuer, does not count; one by the release workflow
// does.
func TestAttestationsKeylessAttTag(t *testing.T) {
	req := signature.Requirements{
		Provenance:      &signature.ProvenanceRequirement{BuilderID: githubBuilder, SourceRepository: agentRepo},
		Vulnerabilities: &signature.VulnerabilityRequirement{MaxSeverity: "HIGH", MaxAge: time.Hour},
	}
	provenance := signing.ProvenanceV1(githubBuilder, agentRepo, "refs/tags/v1.0.0")
	scan := signing.TrivyScan(time.Now().Add(-time.Minute), nil)
	for name, c := range map[string]struct {
		subject, issuer string
		passes          bool
	}{
		"the release workflow":                    {subject: releaseFlow, issuer: githubIssuer, passes: true},
		"another repository's workflow":           {subject: "https://github.com/evil/fork/.github/workflows/release.yaml@refs/tags/v1.0.0", issuer: githubIssuer},
		"the release workflow, another issuer":    {subject: releaseFlow, issuer: "https://gitlab.example/oidc"},
		"another workflow of the same repository": {subject: "https://github.com/acme/agent/.github/workflows/debug.yaml@refs/heads/main", issuer: githubIssuer},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t)
			s := signing.NewSigstore(t)
			policy := compile(t, keylessSpec(t, s, `^https://github.com/acme/agent/\.github/workflows/release\.yaml@.*$`))
			s.AttestTag(t, e.reg, "app", e.digest, c.subject, c.issuer, signature.SLSAProvenanceV1, provenance)
			s.AttestTag(t, e.reg, "app", e.digest, c.subject, c.issuer, signature.CosignVulnV1, scan)
			v, err := signature.Attestations(t.Context(), e.client, e.image, e.digest, policy, req, time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			if c.passes {
				g.Expect(v.Passed).To(BeTrue(), v.Reason)
				return
			}
			g.Expect(v.Passed).To(BeFalse(), "an attestation by another identity counted")
			g.Expect(v.Type).To(Equal(signature.ProvenanceAttestation))
			g.Expect(v.Reason).To(Equal(e.digest + ": no SLSA provenance attestation"))
		})
	}
}
