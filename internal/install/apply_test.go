package install

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// TestWaitThatTimesOutNamesWhatIsNotReady installs on a real control
// plane, where no kubelet makes the manager's Deployment available, and
// waits for it again and again, each wait ending at one of its polls:
// each must say it timed out and name the Deployment, never fail on how
// its requests were paced (`uprev install` once said "client rate limiter
// Wait returned an error: rate: Wait(n=1) would exceed context deadline"
// when its last poll met its deadline).
func TestWaitThatTimesOutNamesWhatIsNotReady(t *testing.T) {
	g := NewWithT(t)
	c, err := cluster.StartEmpty(cluster.AssetsDir())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping control plane: %v", err)
		}
	})
	m, err := Build(Options{Version: "v1.2.3"})
	g.Expect(err).NotTo(HaveOccurred())
	a, err := NewApplier(c.Config)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()
	_, err = a.Apply(ctx, m, ApplyOptions{Timeout: time.Minute, Interval: 100 * time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())

	for range 20 {
		err := a.Wait(ctx, m, ApplyOptions{Timeout: time.Second, Interval: 100 * time.Millisecond})
		g.Expect(err).To(MatchError(ContainSubstring("waiting for the install to be ready: timeout waiting for: [")))
		g.Expect(err.Error()).To(ContainSubstring("Deployment/uprev-system/uprev status: 'InProgress'"))
	}
	g.Expect(ctx.Err()).NotTo(HaveOccurred(), "%v", context.Cause(ctx))
}
