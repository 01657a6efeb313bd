package outbound

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Sleep waits for d on clk, or until ctx is done and then returns
// ctx.Err(): the one wait of the outbound layer (retries, rate limits),
// on an injected clock so that tests need not wait in real time.
func Sleep(ctx context.Context, clk clock.WithTicker, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := clk.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
