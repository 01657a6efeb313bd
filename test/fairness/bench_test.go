package fairness

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/testenv/tarpit"
)

// BenchmarkGoodTenantReady measures how long a good tenant's new Sync and
// UpdateAutomation take to be Ready (the automation's commit pushed), on a
// quiet manager, on one where another tenant has six Syncs and six
// automations on a Git server that never answers (spec.git.timeout 3s),
// and on one where twelve tenants, in namespaces of their own, have one
// each on that server.
func BenchmarkGoodTenantReady(b *testing.B) {
	for name, tarpitTenants := range map[string]func(testing.TB, *tarpit.Tarpit) *tenant{
		"quiet":                nil,
		"tarpit-tenant":        startTarpitTenant,
		"tarpit-12-namespaces": startTarpitTenants,
	} {
		b.Run(name, func(b *testing.B) {
			g := NewWithT(b)
			startManager(b)
			if tarpitTenants != nil {
				tp := tarpit.Start(b)
				tarpitTenants(b, tp)
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
