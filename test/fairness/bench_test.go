package fairness

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/testenv/tarpit"
)

// BenchmarkGoodTenantReady measures how long a good tenant's new Sync and
// UpdateAutomation take to be Ready (the automation's commit pushed), on a
// quiet manager and on one where another tenant has six Syncs and six
// automations on a Git server that never answers (spec.git.timeout 3s).
func BenchmarkGoodTenantReady(b *testing.B) {
	for _, withTarpit := range []bool{false, true} {
		name := "quiet"
		if withTarpit {
			name = "tarpit-tenant"
		}
		b.Run(name, func(b *testing.B) {
			g := NewWithT(b)
			startManager(b)
			if withTarpit {
				tp := tarpit.Start(b)
				startTarpitTenant(b, tp)
				g.Eventually(tp.Accepted, time.Minute).Should(BeNumerically(">=", 2))
			}
			var worst time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				good := startGoodTenant(b, g)
				b.StartTimer()
				start := time.Now()
				good.createObjects(b)
				good.expectReady(b, g, goodBound)
				worst = max(worst, time.Since(start))
			}
			b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
		})
	}
}
