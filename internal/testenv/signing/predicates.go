package signing

import (
	"fmt"
	"strings"
	"time"
)

// Predicate types the helpers below write.
const (
	// SLSAProvenanceV1 is the predicate type of ProvenanceV1.
	SLSAProvenanceV1 = "https://slsa.dev/provenance/v1"
	// SLSAProvenanceV02 is the predicate type of ProvenanceV02.
	SLSAProvenanceV02 = "https://slsa.dev/provenance/v0.2"
	// SPDXDocument is the predicate type of SPDX.
	SPDXDocument = "https://spdx.dev/Document"
	// VulnsV02 is the predicate type of Scan.
	VulnsV02 = "https://in-toto.io/attestation/vulns/v0.2"
	// CosignVulnV1 is the predicate type of TrivyScan and GrypeScan.
	CosignVulnV1 = "https://cosign.sigstore.dev/attestation/vuln/v1"
	// OpenVEX is the predicate type of NotAffected.
	OpenVEX = "https://openvex.dev/ns/v0.2.0"
)

// NotAffected is an OpenVEX document saying that cve does not affect the
// image (status not_affected), as `vexctl attest` writes it.
func NotAffected(cve string) []byte {
	return fmt.Appendf(nil, `{"@context":"https://openvex.dev/ns/v0.2.0","@id":"https://acme.example/vex/1","author":"acme",
"timestamp":"2026-11-01T00:00:00Z","version":1,"statements":[{"vulnerability":{"name":%q},"status":"not_affected",
"justification":"vulnerable_code_not_in_execute_path"},{"vulnerability":{"name":"CVE-2026-7"},"status":"affected"}]}`, cve)
}

// SPDX is a small SPDX 2.3 document, the predicate of an SBOM attestation.
var SPDX = []byte(`{"spdxVersion":"SPDX-2.3","SPDXID":"SPDXRef-DOCUMENT","name":"agent","packages":[]}`)

// ProvenanceV1 is SLSA provenance v1 as GitHub artifact attestations
// write it, for a build by builder of repository (https://github.com/acme/agent)
// at ref (refs/tags/v1.0.0).
func ProvenanceV1(builder, repository, ref string) []byte {
	return fmt.Appendf(nil, `{"buildDefinition":{"buildType":"https://actions.github.io/buildtypes/workflow/v1",
"externalParameters":{"workflow":{"ref":%q,"repository":%q,"path":".github/workflows/release.yaml"}},
"resolvedDependencies":[{"uri":"git+%s@%s","digest":{"gitCommit":"7d3f"}}]},
"runDetails":{"builder":{"id":%q},"metadata":{"invocationId":"https://github.com/acme/agent/actions/runs/1"}}}`,
		ref, repository, repository, ref, builder)
}

// ProvenanceV02 is SLSA provenance v0.2 as slsa-github-generator writes it.
func ProvenanceV02(builder, repository, ref string) []byte {
	return fmt.Appendf(nil, `{"builder":{"id":%q},"buildType":"https://github.com/slsa-framework/slsa-github-generator/container@v1",
"invocation":{"configSource":{"uri":"git+%s@%s","digest":{"sha1":"7d3f"},"entryPoint":".github/workflows/release.yaml"}}}`,
		builder, repository, ref)
}

// Scan is an in-toto vulnerability scan finished at, with findings of
// id → severity (a name such as CRITICAL, or a CVSS score such as 9.8).
func Scan(at time.Time, findings map[string]string) []byte {
	results := make([]string, 0, len(findings))
	for id, sev := range findings {
		results = append(results, fmt.Sprintf(`{"id":%q,"severity":[{"method":"nvd","score":%q}]}`, id, sev))
	}
	return fmt.Appendf(nil, `{"scanner":{"uri":"pkg:github/aquasecurity/trivy@0.58.0","result":[%s]},
"metadata":{"scanStartedOn":%q,"scanFinishedOn":%q}}`, strings.Join(results, ","),
		at.Add(-time.Minute).UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
}

// TrivyScan is cosign's vulnerability predicate (`cosign attest --type
// vuln --predicate trivy.json`) of a Trivy scan finished at, with findings
// of id → severity (CRITICAL, HIGH, ...), in Trivy's JSON report.
func TrivyScan(at time.Time, findings map[string]string) []byte {
	vulns := make([]string, 0, len(findings))
	for id, sev := range findings {
		vulns = append(vulns, fmt.Sprintf(`{"VulnerabilityID":%q,"PkgName":"openssl","InstalledVersion":"3.0.1","Severity":%q}`, id, sev))
	}
	report := fmt.Sprintf(`{"SchemaVersion":2,"ArtifactName":"ghcr.io/acme/agent","ArtifactType":"container_image",
"Results":[{"Target":"ghcr.io/acme/agent (alpine 3.20)","Class":"os-pkgs","Type":"alpine","Vulnerabilities":[%s]},
{"Target":"app/go.mod","Class":"lang-pkgs","Type":"gomod"}]}`, strings.Join(vulns, ","))
	return cosignVuln("pkg:github/aquasecurity/trivy@0.58.0", report, at)
}

// GrypeScan is cosign's vulnerability predicate of a Grype scan finished
// at, with findings of id → severity (Critical, High, ...), in Grype's
// JSON report.
func GrypeScan(at time.Time, findings map[string]string) []byte {
	matches := make([]string, 0, len(findings))
	for id, sev := range findings {
		matches = append(matches, fmt.Sprintf(`{"vulnerability":{"id":%q,"severity":%q},"artifact":{"name":"openssl","version":"3.0.1"}}`, id, sev))
	}
	return cosignVuln("pkg:github/anchore/grype@0.86.0", fmt.Sprintf(`{"matches":[%s]}`, strings.Join(matches, ",")), at)
}

// cosignVuln wraps a scanner's report in cosign's vulnerability predicate.
func cosignVuln(scanner, report string, at time.Time) []byte {
	return fmt.Appendf(nil, `{"invocation":{"parameters":null,"uri":"","event_id":"","builder.id":""},
"scanner":{"uri":%q,"version":"","db":{"uri":"","version":""},"result":%s},
"metadata":{"scanStartedOn":%q,"scanFinishedOn":%q}}`, scanner, report,
		at.Add(-time.Minute).UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
}
