package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/signature"
)

// maxVerificationsPerSelection bounds the candidates whose signatures one
// selection reads from the registry (verdicts from the cache are not
// counted): a flood of unsigned tags is worked through over several runs,
// each retried with backoff, instead of holding a worker for all of them.
const maxVerificationsPerSelection = 20

// trustedRootKey is the key of the trustedRootSecretRef Secret that holds
// the Sigstore trusted root, as in Flux.
const trustedRootKey = "trusted_root.json"

// verification is the signature check of one ReleaseGate.
type verification struct {
	// gate indexes the gate in the list Select takes.
	gate   int
	policy signature.Policy
	// round names the scan of the policy's repository and the reconcile
	// requests the selection works for: a refusal cached in another round
	// is read again (signature.Verifier.Verify).
	round string
	// attest, when set, are the attestations the gate requires, signed as
	// policy accepts.
	attest *signature.Requirements
}

// verificationRound names what a selection of pol from repo has seen: the
// repository's last scan (its time, and the scan request it handled) and
// the reconcile request of pol. A new scan or a new request of either
// begins a new round, in which signatures refused before are read again,
// so that a signature pushed after its image is found at the next scan,
// and at once when a reconcile is requested.
func verificationRound(pol *imagev1.ImagePolicy, repo *imagev1.ImageRepository) string {
	var scan string
	if r := repo.Status.LastScanResult; r != nil {
		scan = r.ScanTime.UTC().Format(time.RFC3339Nano)
	}
	requested, _ := meta.ReconcileAnnotationValue(pol.GetAnnotations())
	return scan + "\x00" + repo.Status.LastHandledReconcileAt + "\x00" + requested
}

// verifyCandidate checks the signature of tag at digest with every check
// of gates, and holds tag back in the Refused of the first gate that
// refuses it. When none refuses, signers names, by ReleaseGate, what each
// accepted signature was verified with. fetched counts the signature
// checks that read from the registry (cached verdicts are free).
func (r *ImagePolicyReconciler) verifyCandidate(ctx context.Context, reg *registry.Client, image string, gates []gate.Gate, checks []verification, tag, digest string, fetched *int) (signers map[string]string, refused bool, err error) {
	signers = map[string]string{}
	for _, c := range checks {
		j, err := r.Verifier.Verify(ctx, reg, image, digest, c.policy, c.round)
		if err != nil {
			return nil, false, verificationError(tag, err)
		}
		if !j.Cached {
			*fetched++
		}
		signedBy := j.SignedBy
		if j.Verified && c.attest != nil {
			if j, err = r.Verifier.Attest(ctx, reg, image, digest, c.policy, *c.attest, c.round); err != nil {
				return nil, false, verificationError(tag, err)
			}
			if !j.Cached {
				*fetched++
			}
			if !j.Verified {
				refuse(ctx, &gates[c.gate], tag, gate.Attestations, j, string(j.Reason)+": "+j.Detail)
				return nil, true, nil
			}
		}
		if j.Verified {
			signers[gates[c.gate].Name] = signedBy
			continue
		}
		refuse(ctx, &gates[c.gate], tag, gate.Verify, j, string(j.Reason))
		return nil, true, nil
	}
	return signers, false, nil
}

// refuse holds tag back at g, refused by the gate kind with reason as j
// judged it, until the check is made again (j.RecheckAt, or the next
// round).
func refuse(ctx context.Context, g *gate.Gate, tag, kind string, j signature.Judged, reason string) {
	ctrl.LoggerFrom(ctx).V(1).Info("Version refused", "tag", tag, "releaseGate", g.Name, "gate", kind,
		"reason", reason, "detail", j.Detail, "cached", j.Cached)
	if g.Refused == nil {
		g.Refused = map[string]gate.Hold{}
	}
	g.Refused[tag] = gate.Hold{Gate: g.Name, Kind: kind, EligibleAt: j.RecheckAt, Reason: reason}
}

// verificationError sorts an error of verifying tag: a registry failure
// is retried, a spec that cannot be used marks the policy not Ready.
func verificationError(tag string, err error) error {
	err = fmt.Errorf("verifying the signature of %s: %w", tag, err)
	switch {
	case errors.Is(err, signature.ErrInvalidSpec):
		return degraded(uprevv1.GateInvalidReason, err)
	case errors.Is(err, registry.ErrInvalidConfig):
		return registryError(err)
	default:
		return transient(uprevv1.VerificationFailedReason, err)
	}
}

// verificationsOf returns the signature checks of gates for a selection
// of pol from repo, reading each ReleaseGate's spec.verify and its
// Secrets. A spec that cannot be used fails the selection (degraded
// GateInvalid), so that no version passes a check that cannot be made.
func (r *ImagePolicyReconciler) verificationsOf(ctx context.Context, pol *imagev1.ImagePolicy, repo *imagev1.ImageRepository, gates []gate.Gate) ([]verification, error) {
	var checks []verification
	round := verificationRound(pol, repo)
	for i, g := range gates {
		var rg uprevv1.ReleaseGate
		if err := r.Get(ctx, types.NamespacedName{Namespace: pol.Namespace, Name: g.Name}, &rg); err != nil {
			return nil, fmt.Errorf("reading ReleaseGate %s: %w", g.Name, err)
		}
		if rg.Spec.Verify == nil {
			continue
		}
		policy, err := r.verifyPolicy(ctx, &rg)
		if err != nil {
			return nil, err
		}
		attest, err := attestationsOf(&rg)
		if err != nil {
			return nil, err
		}
		checks = append(checks, verification{gate: i, policy: policy, round: round, attest: attest})
	}
	return checks, nil
}

// verifyPolicy compiles the spec.verify of rg with the data of its
// Secrets. A missing Secret is retried (SecretNotFound); a spec that
// cannot be used is degraded GateInvalid, naming the field, never a
// Secret's content.
func (r *ImagePolicyReconciler) verifyPolicy(ctx context.Context, rg *uprevv1.ReleaseGate) (signature.Policy, error) {
	v := rg.Spec.Verify
	spec := signature.Spec{Provider: v.Provider}
	var err error
	if v.SecretRef != nil {
		if spec.Keys, err = secretData(ctx, r.Client, rg.Namespace, v.SecretRef.Name); err != nil {
			return nil, err
		}
	}
	if v.TrustedRootSecretRef != nil {
		data, err := secretData(ctx, r.Client, rg.Namespace, v.TrustedRootSecretRef.Name)
		if err != nil {
			return nil, err
		}
		if spec.TrustedRoot = data[trustedRootKey]; spec.TrustedRoot == nil {
			return nil, degraded(uprevv1.GateInvalidReason,
				fmt.Errorf("ReleaseGate %s: spec.verify.trustedRootSecretRef: secret %s has no %s", rg.Name, v.TrustedRootSecretRef.Name, trustedRootKey))
		}
	}
	for _, id := range v.MatchOIDCIdentity {
		spec.Identities = append(spec.Identities, signature.Identity{Issuer: id.Issuer, Subject: id.Subject})
	}
	policy, err := signature.Compile(spec)
	if err != nil {
		return nil, degraded(uprevv1.GateInvalidReason, fmt.Errorf("ReleaseGate %s: spec.verify: %w", rg.Name, err))
	}
	return policy, nil
}

// attestationsOf returns what spec.attestations of rg requires; nil when
// it requires nothing. A maxAge that does not parse is degraded
// GateInvalid.
func attestationsOf(rg *uprevv1.ReleaseGate) (*signature.Requirements, error) {
	a := rg.Spec.Attestations
	if a == nil {
		return nil, nil
	}
	req := &signature.Requirements{SBOM: a.SBOM}
	if p := a.SLSAProvenance; p != nil {
		req.Provenance = &signature.ProvenanceRequirement{BuilderID: p.BuilderID, SourceRepository: p.SourceRepository, WorkflowRef: p.WorkflowRef}
	}
	if v := a.Vulnerabilities; v != nil {
		age, err := specDuration("spec.attestations.vulnerabilities.maxAge", v.MaxAge, "168h")
		if err != nil {
			return nil, degraded(uprevv1.GateInvalidReason, fmt.Errorf("ReleaseGate %s: %v", rg.Name, err))
		}
		req.Vulnerabilities = &signature.VulnerabilityRequirement{MaxSeverity: v.MaxSeverity, MaxAge: age}
	}
	return req, nil
}
