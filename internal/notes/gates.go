package notes

import (
	"fmt"
	"slices"
	"strings"
	"time"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
)

// GateChecks are the lines on what the ReleaseGates of gates checked of
// version, the new version of the ImagePolicy policy of their namespace,
// as their status.policies reports it (the one home of a gate's
// verdicts, read here, never judged again): the signature their verify
// accepted, the attestations they checked, the targets of their promotion
// that run it healthy, and the newer versions whose signature or
// attestations they refused. selects tells which gates select the policy;
// a selecting gate whose status does not report version yet says so. A
// nil selects takes the gates whose status lists the policy.
func GateChecks(gates []uprevv1.ReleaseGate, policy, version string, selects func(*uprevv1.ReleaseGate) bool) []string {
	sorted := slices.Clone(gates)
	slices.SortFunc(sorted, func(a, b uprevv1.ReleaseGate) int { return strings.Compare(a.Name, b.Name) })
	var out []string
	for i := range sorted {
		rg := &sorted[i]
		j := slices.IndexFunc(rg.Status.Policies, func(gp uprevv1.GatedPolicy) bool { return gp.Name == policy })
		switch {
		case selects != nil && !selects(rg), selects == nil && j < 0:
			continue
		case j < 0:
			out = append(out, fmt.Sprintf("ReleaseGate %s has not reported on %s yet", CodeSpan(rg.Name), CodeSpan(version)))
			continue
		}
		out = append(out, gatedPolicyLines(rg, rg.Status.Policies[j], version)...)
	}
	return out
}

// gatedPolicyLines are the lines of one ReleaseGate's report gp on a
// policy whose new version is version.
func gatedPolicyLines(rg *uprevv1.ReleaseGate, gp uprevv1.GatedPolicy, version string) []string {
	name := CodeSpan(rg.Name)
	var out []string
	switch l := gp.Latest; {
	case l == nil || l.Tag != version:
		out = append(out, fmt.Sprintf("ReleaseGate %s has not reported on %s yet", name, CodeSpan(version)))
	default:
		if l.SignedBy != "" {
			out = append(out, fmt.Sprintf("Signature: verified by ReleaseGate %s, %s", name, l.SignedBy))
			// The gate checks attestations of a digest whose signature it
			// accepted, before it lets it through.
			if rg.Spec.Attestations != nil {
				out = append(out, fmt.Sprintf("Attestations: %s, checked by ReleaseGate %s", strings.Join(attestationKinds(rg.Spec.Attestations), ", "), name))
			}
		}
		for _, p := range l.Promoted {
			out = append(out, fmt.Sprintf("Promotion: runs healthy on %s of Sync %s since %s (ReleaseGate %s)",
				CodeSpan(p.Target), CodeSpan(p.Sync), p.HealthySince.UTC().Format(time.RFC3339), name))
		}
	}
	for _, w := range gp.Waiting {
		if w.Tag != version && (w.Gate == gate.Verify || w.Gate == gate.Attestations) {
			out = append(out, fmt.Sprintf("Refused: newer version %s, by ReleaseGate %s (%s): %s", CodeSpan(w.Tag), name, w.Gate, w.Reason))
		}
	}
	return out
}

// attestationKinds names what spec.attestations requires.
func attestationKinds(a *uprevv1.Attestations) []string {
	var out []string
	if a.SLSAProvenance != nil {
		out = append(out, "SLSA provenance")
	}
	if a.SBOM {
		out = append(out, "SBOM")
	}
	if a.Vulnerabilities != nil {
		out = append(out, "vulnerability scan")
	}
	return out
}

// CodeSpan is untrusted text as inline code.
func CodeSpan(s string) string {
	return "`" + strings.ReplaceAll(Inline(s), "`", "'") + "`"
}
