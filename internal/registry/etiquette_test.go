package registry

import (
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// warmClient returns a client that has done its handshake with r (so later
// requests are the ones a test counts), and resets r's counts.
func warmClient(t *testing.T, r *testregistry.Registry, opts ScannerOptions, repo string) *Client {
	t.Helper()
	c := newClient(t, opts, Access{})
	if _, err := c.ListTags(t.Context(), r.Image(repo)); err != nil {
		t.Fatalf("warming up the client: %v", err)
	}
	r.ResetCounts()
	return c
}

func TestRetryAfterSecondsIsHonoured(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	clock := newFakeClock()
	c := warmClient(t, r, ScannerOptions{Clock: clock}, "acme/agent")

	r.ThrottleNext(2, "7")
	tags, err := c.ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).To(ConsistOf("1.0.0", "1.1.0"))
	g.Expect(clock.Sleeps()).To(Equal([]time.Duration{7 * time.Second, 7 * time.Second}))
	g.Expect(r.Counts()).To(Equal(testregistry.Counts{Total: 3, TagListPages: 3, Throttled: 2}))
}

func TestRetryAfterDateIsHonoured(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	clock := newFakeClock()
	c := warmClient(t, r, ScannerOptions{Clock: clock}, "acme/agent")

	r.ThrottleNext(1, clock.Now().Add(30*time.Second).Format(http.TimeFormat))
	_, err := c.Digest(t.Context(), r.Image("acme/agent"), "1.0.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clock.Sleeps()).To(Equal([]time.Duration{30 * time.Second}))
	g.Expect(r.Counts()).To(Equal(testregistry.Counts{Total: 2, ManifestHead: 2, Throttled: 1}))
}

func TestBackoffWithoutRetryAfterIsExponential(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	clock := newFakeClock()
	c := warmClient(t, r, ScannerOptions{Clock: clock, BaseBackoff: time.Second}, "acme/agent")

	r.ThrottleNext(3, "")
	_, err := c.ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).NotTo(HaveOccurred())
	sleeps := clock.Sleeps()
	g.Expect(sleeps).To(HaveLen(3))
	for i, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		g.Expect(sleeps[i]).To(BeNumerically(">=", base))
		g.Expect(sleeps[i]).To(BeNumerically("<=", base+base/10+1))
	}
}

func TestThrottlingIsNotFlooded(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	clock := newFakeClock()
	c := warmClient(t, r, ScannerOptions{Clock: clock, MaxAttempts: 3}, "acme/agent")

	r.ThrottleNext(100, "1")
	_, err := c.ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).To(MatchError(ErrTransient))
	g.Expect(r.Counts().TagListPages).To(Equal(3))
	g.Expect(clock.Sleeps()).To(HaveLen(2))
}

func TestLongRetryAfterIsNotWaitedFor(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	clock := newFakeClock()
	c := warmClient(t, r, ScannerOptions{Clock: clock, MaxRetryAfter: time.Minute}, "acme/agent")

	r.ThrottleNext(1, "3600")
	_, err := c.ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).To(MatchError(ErrTransient))
	g.Expect(r.Counts().TagListPages).To(Equal(1))
	g.Expect(clock.Sleeps()).To(BeEmpty())
}

func TestRetryAfterWaitsInRealTime(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	c := warmClient(t, r, ScannerOptions{}, "acme/agent")

	r.ThrottleNext(1, "1")
	start := time.Now()
	_, err := c.ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(time.Since(start)).To(BeNumerically(">=", time.Second))
	g.Expect(r.Counts().TagListPages).To(Equal(2))
}

func TestConcurrencyPerHostIsLimited(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	c := warmClient(t, r, ScannerOptions{MaxConcurrentPerHost: 2}, "acme/agent")

	release := r.Hold()
	defer release()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := c.Digest(t.Context(), r.Image("acme/agent"), "1.0.0")
			errs <- err
		})
	}
	g.Eventually(r.InFlight).Should(Equal(2))
	g.Consistently(r.InFlight, 200*time.Millisecond, 10*time.Millisecond).Should(Equal(2))
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(r.MaxInFlight()).To(Equal(2))
	g.Expect(r.Counts().ManifestHead).To(Equal(8))
}

func TestRateLimitPerHost(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	clock := newFakeClock()
	c := warmClient(t, r, ScannerOptions{Clock: clock, RequestsPerSecond: 2, Burst: 1}, "acme/agent")
	waitedBefore := len(clock.Sleeps())

	for range 4 {
		_, err := c.Digest(t.Context(), r.Image("acme/agent"), "1.0.0")
		g.Expect(err).NotTo(HaveOccurred())
	}
	var waited time.Duration
	for _, d := range clock.Sleeps()[waitedBefore:] {
		waited += d
	}
	// Four requests at 2/s after the warm-up used the burst: 4 × 500ms.
	g.Expect(waited).To(Equal(2 * time.Second))
}

func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	metrics := NewMetrics()
	reg := prometheus.NewRegistry()
	g.Expect(metrics.Register(reg)).To(Succeed())
	g.Expect(metrics.Register(reg)).NotTo(Succeed())

	c := newClient(t, ScannerOptions{Clock: newFakeClock(), Metrics: metrics}, Access{})
	r.ThrottleNext(1, "1")
	_, err := c.ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(testutil.ToFloat64(metrics.Requests.WithLabelValues(r.Host(), "429"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(metrics.Requests.WithLabelValues(r.Host(), "200"))).To(Equal(2.0)) // ping, page
	g.Expect(testutil.CollectAndCount(metrics.Duration, "uprev_registry_request_duration_seconds")).To(Equal(1))
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for value, want := range map[string]time.Duration{
		"0":                             0,
		"120":                           2 * time.Minute,
		"Sat, 21 Nov 2026 12:00:10 GMT": 10 * time.Second,
		"Sat, 21 Nov 2026 11:00:00 GMT": 0,
	} {
		got, ok := retryAfter(value, now)
		NewWithT(t).Expect(ok).To(BeTrue(), value)
		NewWithT(t).Expect(got).To(Equal(want), value)
	}
	for _, value := range []string{"", "-1", "soon"} {
		_, ok := retryAfter(value, now)
		NewWithT(t).Expect(ok).To(BeFalse(), value)
	}
}
