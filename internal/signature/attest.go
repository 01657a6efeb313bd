package signature

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	provenance02 "github.com/in-toto/attestation/go/predicates/provenance/v02"
	provenance1 "github.com/in-toto/attestation/go/predicates/provenance/v1"
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
	// VulnsV02 is the in-toto vulnerability scan predicate (cosign's is
	// CosignVulnV1).
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
// of each, all within one call's timeout of reg. One over
// MaxSignatureBytes counts only as an SBOM read as a stream, up to
// MaxSBOMLayerBytes (MaxKeylessSBOMLayerBytes under a keyless policy),
// at most MaxStreamedAttestations of them (largeAttestation); a refusal
// names each that did not count and why.
// now dates a scan.
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
	ctx, done, cancel := withReadDeadline(ctx, reg, "the attestations of "+digest)
	defer cancel()
	var statements []*intoto.Statement
	// notes say why attestations over MaxSignatureBytes do not count; a
	// refusal names them, so that none is silently absent.
	var notes []string
	streamed := 0
	large := func(img v1.Image, layer v1.Descriptor, where string) error {
		if _, bound, _ := p.largeBounds(); layer.Size <= bound && streamed == MaxStreamedAttestations {
			notes = append(notes, fmt.Sprintf("%s (layer %s, %d bytes) was not read: %d attestations over %d bytes were read already",
				where, layer.Digest, layer.Size, MaxStreamedAttestations, MaxSignatureBytes))
			return nil
		} else if layer.Size <= bound {
			streamed++
		}
		st, note, err := p.largeAttestation(ctx, img, layer, hash, where)
		if st != nil {
			statements = append(statements, st)
		} else if note != "" {
			notes = append(notes, note)
		}
		return err
	}
	entities, err := referrerBundles(ctx, reg, image, hash, large)
	if err = done(err); err != nil {
		return AttestationVerdict{}, err
	}
	tagged, err := tagAttestations(ctx, reg, image, hash, large)
	if err = done(err); err != nil {
		return AttestationVerdict{}, err
	}
	refuse := func(typ, reason string) (AttestationVerdict, error) {
		if len(notes) > 0 {
			reason += "; " + strings.Join(notes, "; ")
		}
		return AttestationVerdict{Type: typ, Reason: digest + ": " + reason}, nil
	}
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
			return refuse(ProvenanceAttestation, reason)
		}
	}
	if req.SBOM && !slices.ContainsFunc(statements, func(st *intoto.Statement) bool { return isSBOM(st.GetPredicateType()) }) {
		return refuse(SBOMAttestation, "no SPDX or CycloneDX attestation")
	}
	if req.Vulnerabilities != nil {
		if reason := checkVulnerabilities(statements, *req.Vulnerabilities, now); reason != "" {
			return refuse(VulnerabilitiesAttestation, reason)
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

// isSBOM tells whether predicateType is an SBOM's.
func isSBOM(predicateType string) bool {
	return slices.ContainsFunc(sbomPredicates, func(prefix string) bool { return strings.HasPrefix(predicateType, prefix) })
}
