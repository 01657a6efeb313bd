package registry

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/time/rate"
)

// Clock is the time source of the retry and rate-limit waits. Tests inject
// one that does not wait in real time.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d, or until ctx is done and then returns ctx.Err().
	Sleep(ctx context.Context, d time.Duration) error
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryTransport retries requests answered 429 Too Many Requests, 502, 503
// or 504, waiting as long as the Retry-After header says, or with
// exponential backoff when there is none, for at most maxAttempts attempts.
// A Retry-After longer than maxWait is not waited for: the answer goes back
// to the caller, whose next scan comes later anyway.
type retryTransport struct {
	next        http.RoundTripper
	clock       Clock
	maxAttempts int
	baseBackoff time.Duration
	maxBackoff  time.Duration
	maxWait     time.Duration
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := t.next.RoundTrip(req)
		if err != nil || !retryableStatus(resp.StatusCode) || attempt >= t.maxAttempts {
			return resp, err
		}
		if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
			return resp, nil
		}
		wait, ok := retryAfter(resp.Header.Get("Retry-After"), t.clock.Now())
		if !ok {
			wait = t.backoff(attempt)
		}
		if wait > t.maxWait {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if err := t.clock.Sleep(req.Context(), wait); err != nil {
			return nil, fmt.Errorf("waiting %s to retry %s %s after HTTP %d: %w", wait, req.Method, req.URL.Redacted(), resp.StatusCode, err)
		}
		retry := req.Clone(req.Context())
		if req.GetBody != nil {
			if retry.Body, err = req.GetBody(); err != nil {
				return nil, fmt.Errorf("rewinding the body of %s %s: %w", req.Method, req.URL.Redacted(), err)
			}
		}
		req = retry
	}
}

// backoff returns the wait before attempt+1 when the registry did not say:
// baseBackoff doubled per attempt, capped at maxBackoff, plus up to 10%
// jitter so that clients throttled together do not come back together.
func (t *retryTransport) backoff(attempt int) time.Duration {
	d := t.baseBackoff << (attempt - 1)
	if d <= 0 || d > t.maxBackoff {
		d = t.maxBackoff
	}
	return d + rand.N(d/10+1)
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryAfter parses a Retry-After header value, either delay-seconds or an
// HTTP date, into a wait from now.
func retryAfter(value string, now time.Time) (time.Duration, bool) {
	if value == "" {
		return 0, false
	}
	if seconds, err := strconv.Atoi(value); err == nil {
		if seconds < 0 {
			return 0, false
		}
		return time.Duration(seconds) * time.Second, true
	}
	when, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return max(when.Sub(now), 0), true
}

// hostLimits bounds the requests to one registry host: at most cap(slots)
// at a time and, when limiter is set, at most its rate.
type hostLimits struct {
	slots   chan struct{}
	limiter *rate.Limiter
}

// limitTransport applies the per-host limits of its Scanner. A slot is held
// until the response body is read to the end or closed.
type limitTransport struct {
	next    http.RoundTripper
	scanner *Scanner
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	limits := t.scanner.limitsFor(req.URL.Host)
	select {
	case limits.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free connection slot to %s: %w", req.URL.Host, ctx.Err())
	}
	release := func() { <-limits.slots }
	if limits.limiter != nil {
		now := t.scanner.clock.Now()
		reservation := limits.limiter.ReserveN(now, 1)
		if delay := reservation.DelayFrom(now); delay > 0 {
			if err := t.scanner.clock.Sleep(ctx, delay); err != nil {
				reservation.CancelAt(t.scanner.clock.Now())
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

func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.release)
	}
	return n, err
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// metricsTransport records every attempt in Metrics.
type metricsTransport struct {
	next    http.RoundTripper
	metrics *Metrics
}

func (t *metricsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	t.metrics.observe(req.URL.Host, code, time.Since(start))
	return resp, err
}

// pageLinkTransport works around go-containerregistry resolving a tag-list
// Link header against the URL it sent (https, once its ping found TLS) and
// then rejecting the result unless its scheme is the one name.Registry
// guesses from the host, which is http for loopback, private-network and
// .local hosts. Without it, paging the tags of a TLS registry on such a
// host fails. The next page still goes out over the scheme the ping chose.
type pageLinkTransport struct {
	next     http.RoundTripper
	insecure bool
}

func (t *pageLinkTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Header.Get("Link") == "" || resp.Request == nil {
		return resp, err
	}
	var opts []name.Option
	if t.insecure {
		opts = append(opts, name.Insecure)
	}
	reg, regErr := name.NewRegistry(resp.Request.URL.Host, opts...)
	if regErr != nil || reg.Scheme() == resp.Request.URL.Scheme {
		return resp, nil
	}
	base := *resp.Request
	u := *base.URL
	u.Scheme = reg.Scheme()
	base.URL = &u
	resp.Request = &base
	return resp, nil
}
