package outbound

import (
	"fmt"
	"io"
	"net/http"
	"sync"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// HostSlots bounds the requests to each host: at most PerHost in flight
// at a time and, when RequestsPerSecond is set, at most that rate. Hosts
// are keyed with the proxy requests go through (HostKey), so a tenant's
// proxy that never answers holds its own slots, not those of everyone
// else reaching the host. Its zero value is not usable; set PerHost. It
// is safe for concurrent use.
type HostSlots struct {
	// PerHost is the most requests in flight to one host.
	PerHost int
	// RequestsPerSecond is the most requests per second to one host;
	// zero means no rate limit.
	RequestsPerSecond float64
	// Burst is the rate limit's burst.
	Burst int
	// Clock is the time source of the rate limit's waits; nil means the
	// wall clock.
	Clock clock.WithTicker

	mu    sync.Mutex
	hosts map[string]*hostLimits
}

// hostLimits are the slots and rate limiter of one key.
type hostLimits struct {
	slots   chan struct{}
	limiter *rate.Limiter
}

// HostKey is the key of the slots of requests to host through the proxy
// via (empty for none).
func HostKey(host, via string) string {
	if via == "" {
		return host
	}
	return host + " via " + via
}

// InUse returns the number of slots of key (see HostKey) held now.
func (s *HostSlots) InUse(key string) int {
	return len(s.limits(key).slots)
}

// Wrap returns next with the slots applied to its requests, which go
// through the proxy via (empty for none). A slot is held until the
// response body is read to its end or closed.
func (s *HostSlots) Wrap(next http.RoundTripper, via string) http.RoundTripper {
	return &slotTransport{next: next, slots: s, via: via}
}

// clock returns the Clock, the wall clock when nil.
func (s *HostSlots) clock() clock.WithTicker {
	if s.Clock == nil {
		return clock.RealClock{}
	}
	return s.Clock
}

// limits returns the limits of key, making them on first use.
func (s *HostSlots) limits(key string) *hostLimits {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hosts == nil {
		s.hosts = map[string]*hostLimits{}
	}
	limits, ok := s.hosts[key]
	if !ok {
		limits = &hostLimits{slots: make(chan struct{}, max(s.PerHost, 1))}
		if s.RequestsPerSecond > 0 {
			limits.limiter = rate.NewLimiter(rate.Limit(s.RequestsPerSecond), max(s.Burst, 1))
		}
		s.hosts[key] = limits
	}
	return limits
}

// slotTransport takes a slot of its HostSlots for each request.
type slotTransport struct {
	next  http.RoundTripper
	slots *HostSlots
	via   string
}

// RoundTrip waits for a slot of the request's host (and the rate limit),
// then sends the request; the slot goes back with the response's body.
func (t *slotTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	limits := t.slots.limits(HostKey(req.URL.Host, t.via))
	select {
	case limits.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free connection slot to %s: %w", req.URL.Host, ctx.Err())
	}
	release := func() { <-limits.slots }
	if limits.limiter != nil {
		clk := t.slots.clock()
		now := clk.Now()
		reservation := limits.limiter.ReserveN(now, 1)
		if delay := reservation.DelayFrom(now); delay > 0 {
			if err := Sleep(ctx, clk, delay); err != nil {
				reservation.CancelAt(clk.Now())
				release()
				return nil, fmt.Errorf("waiting for the rate limit of %s: %w", req.URL.Host, err)
			}
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// releasingBody calls release once, when the body is read to its end or
// closed, whichever comes first.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

// Read reads the body, releasing the slot at its end.
func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.release)
	}
	return n, err
}

// Close closes the body and releases the slot.
func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
