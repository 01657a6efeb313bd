package controllers

import "math/rand"

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
