package controllers

import (
	"math/rand"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// JitterRand returns a random source for the interval jitter that is safe
// for concurrent use: every reconciler draws from it at once, and a plain
// *rand.Rand is not.
func JitterRand() *rand.Rand { return rand.New(globalRandSource{}) }

// globalRandSource draws from math/rand's top-level generator, which is
// safe for concurrent use.
type globalRandSource struct{}

// Int63 returns a non-negative pseudo-random number.
func (globalRandSource) Int63() int64 { return rand.Int63() }

// Seed does nothing: the top-level generator is seeded at random.
func (globalRandSource) Seed(int64) {}

// atLeastMinInterval returns when obj's next run is due, after (0: only
// on a change), under the manager's floor (Options.MinInterval, 0 for
// none): an object whose spec.interval is shorter than the floor runs
// again at most once per floor, whatever else (a wait, a retry) its run
// asked for. Flux's kinds are served with Flux's CRDs, which have no
// floor on intervals (interval: 1ms wrote an ImageRepository's status
// about 140 times a second); uprev's own have one in their schemas.
func atLeastMinInterval(obj client.Object, after, floor time.Duration) time.Duration {
	if after <= 0 || floor <= 0 {
		return after
	}
	if interval := specInterval(obj); interval > 0 && interval < floor {
		return max(after, floor)
	}
	return after
}

// specInterval is the interval obj's spec asks for, 0 for a kind that has
// none.
func specInterval(obj client.Object) time.Duration {
	switch o := obj.(type) {
	case *imagev1.ImageRepository:
		return o.Spec.Interval.Duration
	case *imagev1.ImagePolicy:
		return o.GetInterval()
	case *iacv1.ImageUpdateAutomation:
		return o.Spec.Interval.Duration
	case *uprevv1.UpdateAutomation:
		return o.Spec.Interval.Duration
	case *uprevv1.Sync:
		return o.Spec.Interval.Duration
	case *uprevv1.ReleaseSource:
		return o.Spec.Interval.Duration
	}
	return 0
}
