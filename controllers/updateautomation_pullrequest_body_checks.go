package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
)

// checkedLines are the body's lines on what uprev checked of version, the
// new version of pol: when the scans first saw it and how long ago, and
// what each ReleaseGate selecting pol reports of it (see gateLines).
func (r *UpdateAutomationReconciler) checkedLines(ctx context.Context, pol *imagev1.ImagePolicy, version string) []string {
	var out []string
	if seen := r.firstSeen(ctx, pol, version); !seen.IsZero() {
		out = append(out, fmt.Sprintf("First seen: %s (%s ago)", seen.UTC().Format(time.RFC3339), releaseAge(r.Clock.Now().Sub(seen))))
	}
	return append(out, gateLines(ctx, r.Client, pol, version)...)
}

// gateLines say what the ReleaseGates selecting pol checked of version,
// as their status.policies reports it (the one home of a gate's verdicts;
// the body reads it, never judges again): the signature their verify
// accepted, the targets of their promotion that run it healthy, and the
// newer versions whose signature or attestations they refused. A gate
// whose status does not report version yet says so. Gates that cannot be
// listed say nothing: the body is no place to fail.
func gateLines(ctx context.Context, c client.Reader, pol *imagev1.ImagePolicy, version string) []string {
	var list uprevv1.ReleaseGateList
	if err := c.List(ctx, &list, client.InNamespace(pol.Namespace)); err != nil {
		return nil
	}
	slices.SortFunc(list.Items, func(a, b uprevv1.ReleaseGate) int { return strings.Compare(a.Name, b.Name) })
	var out []string
	for i := range list.Items {
		rg := &list.Items[i]
		if !gateSelects(rg, pol) {
			continue
		}
		j := slices.IndexFunc(rg.Status.Policies, func(gp uprevv1.GatedPolicy) bool { return gp.Name == pol.Name })
		if j < 0 {
			out = append(out, fmt.Sprintf("ReleaseGate %s has not reported on %s yet", codeSpan(rg.Name), codeSpan(version)))
			continue
		}
		out = append(out, gatedPolicyLines(rg, rg.Status.Policies[j], version)...)
	}
	return out
}

// gatedPolicyLines are the lines of one ReleaseGate's report gp on a
// policy whose new version is version.
func gatedPolicyLines(rg *uprevv1.ReleaseGate, gp uprevv1.GatedPolicy, version string) []string {
	name := codeSpan(rg.Name)
	var out []string
	switch l := gp.Latest; {
	case l == nil || l.Tag != version:
		out = append(out, fmt.Sprintf("ReleaseGate %s has not reported on %s yet", name, codeSpan(version)))
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
				codeSpan(p.Target), codeSpan(p.Sync), p.HealthySince.UTC().Format(time.RFC3339), name))
		}
	}
	for _, w := range gp.Waiting {
		if w.Tag != version && (w.Gate == gate.Verify || w.Gate == gate.Attestations) {
			out = append(out, fmt.Sprintf("Refused: newer version %s, by ReleaseGate %s (%s): %s", codeSpan(w.Tag), name, w.Gate, w.Reason))
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

// firstSeen is when the image scans first saw tag of pol's image, zero
// when not known.
func (r *UpdateAutomationReconciler) firstSeen(ctx context.Context, pol *imagev1.ImagePolicy, tag string) time.Time {
	if r.Tags == nil {
		return time.Time{}
	}
	repo, err := allowedRepository(ctx, r.Client, pol, r.NoCrossNamespaceRefs)
	if err != nil {
		return time.Time{}
	}
	seen, err := r.Tags.SeenTags(repoKey(repo))
	if err != nil {
		return time.Time{}
	}
	for _, t := range seen {
		if t.Name == tag {
			return t.FirstSeen
		}
	}
	return time.Time{}
}

// releaseAge says an age in days, hours, or minutes under an hour.
func releaseAge(d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}
