package signature

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/cache"
)

// Attest checks the attestations of image@digest against req, with the
// keys or identities of policy (Attestations), unless a verdict of the
// same round is cached. Unlike a signature, an attestation verdict can
// change for the same digest either way (a scan gets old, a new scan or
// VEX statement is pushed), so passes and refusals alike stand only within
// their round and for at most RecheckAfter. The Judged's Reason is the
// attestation type refused and its Detail the reason, naming the digest.
// Errors are those of the registry or ErrInvalidSpec; nothing is cached
// for them.
func (v *Verifier) Attest(ctx context.Context, reg Registry, image, digest string, policy Policy, req Requirements, round string) (Judged, error) {
	key := fmt.Sprintf("attest\x00%s\x00%s\x00%s@%s", policy.Fingerprint(), req.fingerprint(), image, digest)
	now := v.clock.Now()
	if j, err := v.cache.Get(key); err == nil && j.round == round && now.Before(j.RecheckAt) {
		j.Cached = true
		return j, nil
	} else if err != nil && !errors.Is(err, cache.ErrNotFound) {
		return Judged{}, fmt.Errorf("reading the verdict cache: %w", err)
	}
	av, err := Attestations(ctx, reg, image, digest, policy, req, now)
	if err != nil {
		return Judged{}, err
	}
	j := Judged{Verdict: Verdict{Verified: av.Passed, Reason: Reason(av.Type), Detail: av.Reason}, RecheckAt: now.Add(v.recheck), round: round}
	if err := v.cache.Set(key, j); err != nil {
		return Judged{}, fmt.Errorf("caching the verdict: %w", err)
	}
	return j, nil
}

// fingerprint identifies what req asks, for the verdict cache.
func (req Requirements) fingerprint() string {
	s := fmt.Sprintf("sbom=%t", req.SBOM)
	if p := req.Provenance; p != nil {
		s += fmt.Sprintf(" provenance=%q,%q,%q", p.BuilderID, p.SourceRepository, p.WorkflowRef)
	}
	if vr := req.Vulnerabilities; vr != nil {
		s += fmt.Sprintf(" vulnerabilities=%q,%s", vr.MaxSeverity, vr.MaxAge)
	}
	return s
}
