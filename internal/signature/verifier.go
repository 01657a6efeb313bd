package signature

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/cache"
	"k8s.io/utils/clock"
)

// DefaultRecheckAfter is how long a refusal stands before the digest's
// signatures are read again, so that a signature pushed after the
// version is seen when this time has passed.
const DefaultRecheckAfter = 10 * time.Minute

// DefaultCacheSize bounds the verdicts a Verifier keeps.
const DefaultCacheSize = 10000

// Options configure a Verifier.
type Options struct {
	// RecheckAfter is how long a refusal stands; 0 is DefaultRecheckAfter.
	RecheckAfter time.Duration
	// CacheSize bounds the cached verdicts (least recently used go
	// first); 0 is DefaultCacheSize.
	CacheSize int
	// Clock tells the time; nil is the system clock.
	Clock clock.PassiveClock
}

// Judged is a verdict with when it was reached and until when it stands.
type Judged struct {
	Verdict
	// RecheckAt is when a refusal is checked again; zero for a verified
	// digest, whose verdict stands as long as the policy is the same.
	RecheckAt time.Time
	// Cached is true when no registry request was made for it.
	Cached bool
	// round is the round a refusal was reached in (see Verify).
	round string
}

// Verifier verifies digests and caches its verdicts per image, digest and
// policy fingerprint. A verified digest stays verified while the policy
// does not change (a digest's content never does); a refusal stands
// within the round it was reached in (a scan of the image's repository, a
// requested reconcile: see Verify), and for at most RecheckAfter, after
// which the signatures are read again, so that a version signed after it
// was first seen is let through by the next scan, reconcile request or
// recheck, whichever comes first, while the evaluations between them
// make no registry request for it. Safe for concurrent use.
type Verifier struct {
	recheck time.Duration
	clock   clock.PassiveClock
	cache   *cache.LRU[Judged]
}

// NewVerifier returns a Verifier configured by opts.
func NewVerifier(opts Options) (*Verifier, error) {
	v := &Verifier{recheck: opts.RecheckAfter, clock: opts.Clock}
	if v.recheck <= 0 {
		v.recheck = DefaultRecheckAfter
	}
	if v.clock == nil {
		v.clock = clock.RealClock{}
	}
	size := opts.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	c, err := cache.NewLRU[Judged](size)
	if err != nil {
		return nil, fmt.Errorf("creating the verdict cache: %w", err)
	}
	v.cache = c
	return v, nil
}

// Verify judges image@digest (the digest a policy writes: an index digest
// for a multi-arch image) against policy, reading its signatures through
// reg unless a standing verdict is cached, all within one call's timeout
// of reg. Errors are those of the
// registry (wrapping registry.ErrNotFound, ErrUnauthorized,
// ErrTransient...) or ErrInvalidSpec; no verdict is cached for them.
//
// round names what the caller has seen since it last asked: the scan of
// the image's repository and the reconcile request it works for. A
// cached refusal is used only in the round it was reached in: a new scan
// (which a signature pushed meanwhile may have followed) or a new request
// reads the signatures again.
func (v *Verifier) Verify(ctx context.Context, reg Registry, image, digest string, policy Policy, round string) (Judged, error) {
	key := policy.Fingerprint() + "\x00" + image + "@" + digest
	now := v.clock.Now()
	if j, err := v.cache.Get(key); err == nil && (j.Verified || (j.round == round && now.Before(j.RecheckAt))) {
		j.Cached = true
		return j, nil
	} else if err != nil && !errors.Is(err, cache.ErrNotFound) {
		return Judged{}, fmt.Errorf("reading the verdict cache: %w", err)
	}
	ctx, done, cancel := withReadDeadline(ctx, reg, "the signatures of "+digest)
	defer cancel()
	verdict, err := policy.verify(ctx, reg, image, digest)
	if err = done(err); err != nil {
		return Judged{}, err
	}
	j := Judged{Verdict: verdict, round: round}
	if !verdict.Verified {
		j.RecheckAt = now.Add(v.recheck)
	}
	if err := v.cache.Set(key, j); err != nil {
		return Judged{}, fmt.Errorf("caching the verdict: %w", err)
	}
	return j, nil
}
