package signature

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	provenance02 "github.com/in-toto/attestation/go/predicates/provenance/v02"
	provenance1 "github.com/in-toto/attestation/go/predicates/provenance/v1"
	vulns02 "github.com/in-toto/attestation/go/predicates/vulns/v02"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Predicate types of the attestations Attestations reads.
const (
	// SLSAProvenanceV1 is SLSA provenance v1 (GitHub artifact
	// attestations, `cosign attest --type slsaprovenance1`).
	SLSAProvenanceV1 = "https://slsa.dev/provenance/v1"
	// SLSAProvenanceV02 is SLSA provenance v0.2 (`--type slsaprovenance`).
	SLSAProvenanceV02 = "https://slsa.dev/provenance/v0.2"
	// VulnsV02 is the in-toto vulnerability scan predicate.
	VulnsV02 = "https://in-toto.io/attestation/vulns/v0.2"
)

// sbomPredicates are the prefixes of SBOM predicate types: SPDX and
// CycloneDX, of any version.
var sbomPredicates = []string{"https://spdx.dev/Document", "https://cyclonedx.org/bom"}

// Attestation types, as a refusal names them.
const (
	// ProvenanceAttestation is an SLSA provenance attestation.
	ProvenanceAttestation = "slsaProvenance"
	// SBOMAttestation is an SPDX or CycloneDX attestation.
	SBOMAttestation = "sbom"
	// VulnerabilitiesAttestation is a vulnerability scan attestation.
	VulnerabilitiesAttestation = "vulnerabilities"
)

// severities orders severity names, lowest first.
var severities = []string{"NONE", "LOW", "MEDIUM", "HIGH", "CRITICAL"}

// ProvenanceRequirement is what SLSA provenance must say.
type ProvenanceRequirement struct {
	// BuilderID is the builder's id, exactly.
	BuilderID string
	// SourceRepository is the repository built from, as a URL
	// (https://github.com/acme/agent), exactly.
	SourceRepository string
	// WorkflowRef, a regular expression, must match the ref built (such
	// as refs/tags/v.*); empty matches any.
	WorkflowRef string
}

// VulnerabilityRequirement is what a vulnerability scan must say.
type VulnerabilityRequirement struct {
	// MaxSeverity is the highest severity allowed (NONE, LOW, MEDIUM,
	// HIGH; CRITICAL allows all).
	MaxSeverity string
	// MaxAge is how old the scan may be.
	MaxAge time.Duration
}

// Requirements are the attestations a digest must carry.
type Requirements struct {
	// Provenance, when set, requires SLSA provenance matching it.
	Provenance *ProvenanceRequirement
	// SBOM requires an SPDX or CycloneDX attestation.
	SBOM bool
	// Vulnerabilities, when set, requires a recent, clean enough scan.
	Vulnerabilities *VulnerabilityRequirement
}

// AttestationVerdict is the outcome of checking the attestations of one
// digest.
type AttestationVerdict struct {
	// Passed is true when every required attestation was found and says
	// what it must.
	Passed bool
	// Type is the attestation type refused (ProvenanceAttestation...).
	Type string
	// Reason says why, naming the digest.
	Reason string
}

// Attestations checks the attestations of image@digest against req: only
// those signed as policy (a cosign key or keyless policy) accepts count.
// They are read from the Sigstore bundles among the digest's referrers
// and from the cosign 2 tag AttestationTag(digest), at most MaxSignatures
// of each, each at most MaxSignatureBytes. now dates a scan.
func Attestations(ctx context.Context, reg Registry, image, digest string, policy Policy, req Requirements, now time.Time) (AttestationVerdict, error) {
	p, ok := policy.(*cosignPolicy)
	if !ok {
		return AttestationVerdict{}, fmt.Errorf("%w: attestations are verified with provider cosign", ErrInvalidSpec)
	}
	var workflow *regexp.Regexp
	if req.Provenance != nil && req.Provenance.WorkflowRef != "" {
		var err error
		if workflow, err = regexp.Compile(req.Provenance.WorkflowRef); err != nil {
			return AttestationVerdict{}, fmt.Errorf("%w: workflowRef: %w", ErrInvalidSpec, err)
		}
	}
	if v := req.Vulnerabilities; v != nil && severityRank(v.MaxSeverity) < 0 {
		return AttestationVerdict{}, fmt.Errorf("%w: maxSeverity %q is not one of %s", ErrInvalidSpec, v.MaxSeverity, strings.Join(severities, ", "))
	}
	hash, err := v1.NewHash(digest)
	if err != nil {
		return AttestationVerdict{}, fmt.Errorf("%w: digest %q: %w", ErrInvalidSpec, digest, err)
	}
	entities, err := referrerBundles(ctx, reg, image, hash)
	if err != nil {
		return AttestationVerdict{}, err
	}
	tagged, err := tagAttestations(ctx, reg, image, hash)
	if err != nil {
		return AttestationVerdict{}, err
	}
	var statements []*intoto.Statement
	for _, e := range append(entities, tagged...) {
		if !p.verifyEntity(e).Verified {
			continue
		}
		if st, err := statementOf(e.entity); err == nil {
			statements = append(statements, st)
		}
	}
	if req.Provenance != nil {
		if reason := checkProvenance(statements, *req.Provenance, workflow); reason != "" {
			return AttestationVerdict{Type: ProvenanceAttestation, Reason: digest + ": " + reason}, nil
		}
	}
	if req.SBOM && !hasSBOM(statements) {
		return AttestationVerdict{Type: SBOMAttestation, Reason: digest + ": no SPDX or CycloneDX attestation"}, nil
	}
	if req.Vulnerabilities != nil {
		if reason := checkVulnerabilities(statements, *req.Vulnerabilities, now); reason != "" {
			return AttestationVerdict{Type: VulnerabilitiesAttestation, Reason: digest + ": " + reason}, nil
		}
	}
	return AttestationVerdict{Passed: true}, nil
}

// statementOf returns the in-toto statement that e's DSSE envelope signs;
// an error for a message signature.
func statementOf(e verify.SignedEntity) (*intoto.Statement, error) {
	sc, err := e.SignatureContent()
	if err != nil {
		return nil, err
	}
	env := sc.EnvelopeContent()
	if env == nil {
		return nil, errors.New("not a DSSE envelope")
	}
	return env.Statement()
}

// predicate decodes the predicate of st into m, ignoring fields m does
// not know.
func predicate(st *intoto.Statement, m proto.Message) error {
	data, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return err
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, m)
}

// built is what a provenance says was built, by whom.
type built struct {
	builder, repository, ref string
}

// provenanceOf reads the builder, source repository and ref of an SLSA
// provenance statement; ok is false for another predicate.
func provenanceOf(st *intoto.Statement) (b built, ok bool) {
	switch st.GetPredicateType() {
	case SLSAProvenanceV1:
		var pv provenance1.Provenance
		if predicate(st, &pv) != nil {
			return b, false
		}
		b.builder = pv.GetRunDetails().GetBuilder().GetId()
		wf := pv.GetBuildDefinition().GetExternalParameters().GetFields()["workflow"].GetStructValue().GetFields()
		b.repository, b.ref = wf["repository"].GetStringValue(), wf["ref"].GetStringValue()
		if b.repository == "" {
			for _, dep := range pv.GetBuildDefinition().GetResolvedDependencies() {
				b.repository, b.ref = splitSource(dep.GetUri())
				break
			}
		}
	case SLSAProvenanceV02:
		var pv provenance02.Provenance
		if predicate(st, &pv) != nil {
			return b, false
		}
		b.builder = pv.GetBuilder().GetId()
		b.repository, b.ref = splitSource(pv.GetInvocation().GetConfigSource().GetUri())
	default:
		return b, false
	}
	return b, true
}

// splitSource splits a source URI (git+https://github.com/acme/agent@refs/tags/v1)
// into its repository and ref.
func splitSource(uri string) (repository, ref string) {
	uri = strings.TrimPrefix(uri, "git+")
	repository, ref, _ = strings.Cut(uri, "@")
	return strings.TrimSuffix(repository, ".git"), ref
}

// checkProvenance returns why no statement is provenance matching want;
// empty when one is.
func checkProvenance(statements []*intoto.Statement, want ProvenanceRequirement, workflow *regexp.Regexp) string {
	reason := "no SLSA provenance attestation"
	for _, st := range statements {
		b, ok := provenanceOf(st)
		switch {
		case !ok:
		case b.builder != want.BuilderID:
			reason = fmt.Sprintf("built by %q, not %q", b.builder, want.BuilderID)
		case b.repository != want.SourceRepository:
			reason = fmt.Sprintf("built from %q, not %q", b.repository, want.SourceRepository)
		case workflow != nil && !workflow.MatchString(b.ref):
			reason = fmt.Sprintf("built from ref %q, which does not match %q", b.ref, workflow)
		default:
			return ""
		}
	}
	return reason
}

// hasSBOM tells whether a statement is an SBOM.
func hasSBOM(statements []*intoto.Statement) bool {
	for _, st := range statements {
		for _, prefix := range sbomPredicates {
			if strings.HasPrefix(st.GetPredicateType(), prefix) {
				return true
			}
		}
	}
	return false
}

// checkVulnerabilities returns why the newest scan among statements does
// not pass want; empty when it does.
func checkVulnerabilities(statements []*intoto.Statement, want VulnerabilityRequirement, now time.Time) string {
	var newest *vulns02.Vulns
	var at time.Time
	for _, st := range statements {
		if st.GetPredicateType() != VulnsV02 {
			continue
		}
		var v vulns02.Vulns
		if predicate(st, &v) != nil {
			continue
		}
		if t := v.GetMetadata().GetScanFinishedOn().AsTime(); newest == nil || t.After(at) {
			newest, at = &v, t
		}
	}
	if newest == nil {
		return "no vulnerability scan attestation"
	}
	if age := now.Sub(at); age > want.MaxAge {
		return fmt.Sprintf("the newest scan, of %s, is older than %s", at.UTC().Format(time.RFC3339), want.MaxAge)
	}
	limit := severityRank(want.MaxSeverity)
	notAffected := notAffectedOf(statements)
	var above []string
	for _, r := range newest.GetScanner().GetResult() {
		if worst(r) > limit && !notAffected[r.GetId()] {
			above = append(above, r.GetId())
		}
	}
	if len(above) > 0 {
		return fmt.Sprintf("%d finding(s) above %s: %s", len(above), want.MaxSeverity, strings.Join(above[:min(len(above), 5)], ", "))
	}
	return ""
}

// openVEXPredicate is the prefix of OpenVEX predicate types
// (https://openvex.dev/ns/v0.2.0).
const openVEXPredicate = "https://openvex.dev/ns"

// openVEX is the part of an OpenVEX document that says a vulnerability
// does not affect the product. (github.com/openvex/go-vex is not among the
// modules uprev may use; these are its field names.)
type openVEX struct {
	Statements []struct {
		Vulnerability json.RawMessage `json:"vulnerability"`
		Status        string          `json:"status"`
	} `json:"statements"`
}

// notAffectedOf returns the vulnerabilities that OpenVEX statements
// among statements say do not affect the image (status not_affected).
// A statement counts for the image whose referrers hold it: its subject
// is the image's digest.
func notAffectedOf(statements []*intoto.Statement) map[string]bool {
	out := map[string]bool{}
	for _, st := range statements {
		if !strings.HasPrefix(st.GetPredicateType(), openVEXPredicate) {
			continue
		}
		data, err := protojson.Marshal(st.GetPredicate())
		if err != nil {
			continue
		}
		var doc openVEX
		if json.Unmarshal(data, &doc) != nil {
			continue
		}
		for _, s := range doc.Statements {
			if s.Status != "not_affected" {
				continue
			}
			// v0.2 names it {"name": "CVE-…"}; v0.0 as a string.
			var v struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(s.Vulnerability, &v) != nil {
				_ = json.Unmarshal(s.Vulnerability, &v.Name)
			}
			if v.Name != "" {
				out[v.Name] = true
			}
		}
	}
	return out
}

// worst is the rank of the highest severity a result states: a severity
// name, or a CVSS score (9 and above is critical).
func worst(r *vulns02.Result) int {
	rank := 0
	for _, s := range r.GetSeverity() {
		n := severityRank(s.GetScore())
		if n < 0 {
			var score float64
			if _, err := fmt.Sscanf(s.GetScore(), "%g", &score); err != nil {
				continue
			}
			switch {
			case score >= 9:
				n = 4
			case score >= 7:
				n = 3
			case score >= 4:
				n = 2
			case score > 0:
				n = 1
			}
		}
		rank = max(rank, n)
	}
	return rank
}

// severityRank is the rank of a severity name in severities, -1 for
// another word.
func severityRank(name string) int {
	for i, s := range severities {
		if strings.EqualFold(s, name) {
			return i
		}
	}
	return -1
}
