package signature

import (
	"context"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"
)

// TestLargeKeylessWaitsForMemory holds all of keylessMemory, as other
// checks of large keyless attestations would: a further check waits, and
// its wait ends with its context, with an error naming what it waited
// to check, rather than holding one more payload.
func TestLargeKeylessWaitsForMemory(t *testing.T) {
	g := NewWithT(t)
	g.Expect(keylessMemory.Acquire(t.Context(), MaxKeylessSBOMBytes)).To(Succeed())
	defer keylessMemory.Release(MaxKeylessSBOMBytes)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := (&cosignPolicy{}).largeKeyless(ctx, nil, 1<<20, largeEnvelope{}, nil, v1.Descriptor{}, v1.Hash{}, "bundle sha256:abc")
	g.Expect(err).To(MatchError(ContainSubstring("waiting to check bundle sha256:abc")))
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
}
