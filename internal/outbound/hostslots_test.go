package outbound_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/uprev-dev/uprev/internal/outbound"
)

// heldServer answers once release is closed, counting the requests in
// flight and the most at once.
type heldServer struct {
	*httptest.Server
	inFlight, most atomic.Int32
}

func startHeld(t *testing.T, release <-chan struct{}) *heldServer {
	s := &heldServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := s.inFlight.Add(1)
		for {
			most := s.most.Load()
			if n <= most || s.most.CompareAndSwap(most, n) {
				break
			}
		}
		<-release
		s.inFlight.Add(-1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

// get sends a GET through rt and reads the answer to its end.
func get(rt http.RoundTripper, u string) error {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// TestHostSlotsBoundRequestsInFlight: no more than PerHost requests to a
// host are in flight at once; the others wait for a slot and all end.
func TestHostSlotsBoundRequestsInFlight(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	srv := startHeld(t, release)
	slots := &outbound.HostSlots{PerHost: 2}
	rt := slots.Wrap(outbound.Denylist(nil).Transport(), "")

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- get(rt, srv.URL) })
	}
	g.Eventually(srv.inFlight.Load).Should(BeEquivalentTo(2))
	g.Consistently(srv.inFlight.Load, 200*time.Millisecond, 10*time.Millisecond).Should(BeEquivalentTo(2))
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(srv.most.Load()).To(BeEquivalentTo(2))
	host := mustHost(t, srv.URL)
	g.Expect(slots.InUse(outbound.HostKey(host, ""))).To(BeZero(), "every slot went back with its body")
}

// TestHostSlotsAreKeyedByProxy: requests that go through a proxy hold the
// slots of the host through that proxy, not the host's direct ones.
func TestHostSlotsAreKeyedByProxy(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	held := startHeld(t, release)
	t.Cleanup(func() { close(release) })
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(fast.Close)

	slots := &outbound.HostSlots{PerHost: 1}
	// The held server stands in for a proxy that never answers: requests
	// to fast's host go to it.
	proxied := outbound.Denylist(nil).Transport()
	proxyURL, err := url.Parse(held.URL)
	g.Expect(err).NotTo(HaveOccurred())
	proxied.Proxy = http.ProxyURL(proxyURL)
	slow := slots.Wrap(proxied, proxyURL.Host)
	go func() { _ = get(slow, fast.URL) }()
	host := mustHost(t, fast.URL)
	g.Eventually(func() int { return slots.InUse(outbound.HostKey(host, proxyURL.Host)) }).Should(Equal(1))

	direct := slots.Wrap(outbound.Denylist(nil).Transport(), "")
	g.Expect(get(direct, fast.URL)).To(Succeed())
}

// TestHostSlotsRateLimit: past the burst, requests to a host wait on the
// clock for the rate.
func TestHostSlotsRateLimit(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	slots := &outbound.HostSlots{PerHost: 4, RequestsPerSecond: 2, Burst: 1, Clock: clk}
	rt := slots.Wrap(outbound.Denylist(nil).Transport(), "")

	g.Expect(get(rt, srv.URL)).To(Succeed(), "the burst")
	done := make(chan error, 1)
	go func() { done <- get(rt, srv.URL) }()
	g.Eventually(clk.HasWaiters).Should(BeTrue(), "the second request waits for the rate")
	g.Consistently(done, 100*time.Millisecond).ShouldNot(Receive())
	clk.Step(500 * time.Millisecond)
	g.Eventually(done).Should(Receive(BeNil()))
}

func mustHost(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
