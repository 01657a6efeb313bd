package registry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/utils/clock"

	"github.com/uprev-dev/uprev/internal/outbound"
)

// retryTransport retries requests answered 429 Too Many Requests, 502, 503
// or 504, waiting as long as the Retry-After header says, or with
// exponential backoff when there is none, for at most maxAttempts attempts.
// A Retry-After longer than maxWait is not waited for: the answer goes back
// to the caller, whose next scan comes later anyway.
type retryTransport struct {
	next        http.RoundTripper
	clock       clock.WithTicker
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
		if err := outbound.Sleep(req.Context(), t.clock, wait); err != nil {
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

// metricsTransport records every attempt in Metrics.
type metricsTransport struct {
	next    http.RoundTripper
	metrics *Metrics
	clock   clock.PassiveClock
}

func (t *metricsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := t.clock.Now()
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	t.metrics.observe(req.URL.Host, code, t.clock.Since(start))
	return resp, err
}

// maxErrorBody is how much of an error answer's body is read.
const maxErrorBody = 64 << 10

// tagListBounds are the bounds of one tag list; ListTags passes a copy in
// the request context, which answerTransport spends.
type tagListBounds struct {
	tags  int
	bytes int64
	pages int
	// separators is the most commas the pages may hold: a list of n tags
	// has n-1 between its tags, plus a few in the rest of each answer.
	// Counting them as the body is read stops a list with too many tags
	// before go-containerregistry decodes it whole.
	separators int
}

// separatorSlack is how many commas each tag-list page may hold beyond
// one per tag, for the answer's other fields.
const separatorSlack = 16

// newTagListBounds returns the bounds of one tag list.
func newTagListBounds(tags int, bytes int64, pages int) tagListBounds {
	return tagListBounds{tags: tags, bytes: bytes, pages: pages, separators: tags + separatorSlack*pages}
}

type tagListBudgetKey struct{}

// withTagListBudget returns ctx carrying budget, spent by the tag-list
// pages fetched with it.
func withTagListBudget(ctx context.Context, budget *tagListBounds) context.Context {
	return context.WithValue(ctx, tagListBudgetKey{}, budget)
}

// answerTransport checks what a registry answers before go-containerregistry
// reads it: a tag-list Link must stay on the registry's host, tag-list pages
// spend the budget in the request context (pages and bytes), a manifest or
// referrers index is read up to MaxManifestBytes only (boundManifest), and
// an error answer's body up to maxErrorBody only.
//
// It also works around go-containerregistry resolving a tag-list Link
// header against the URL it sent (https, once its ping found TLS) and then
// rejecting the result unless its scheme is the one name.Registry guesses
// from the host, which is http for loopback, private-network and .local
// hosts. Without it, paging the tags of a TLS registry on such a host
// fails. The next page still goes out over the scheme the ping chose.
type answerTransport struct {
	next     http.RoundTripper
	insecure bool
}

func (t *answerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	budget, _ := req.Context().Value(tagListBudgetKey{}).(*tagListBounds)
	if budget != nil && strings.HasSuffix(req.URL.Path, "/tags/list") {
		if budget.pages <= 0 {
			return nil, fmt.Errorf("%w: more pages than its bound", ErrTagListTooLarge)
		}
		budget.pages--
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode >= http.StatusBadRequest {
		resp.Body = limitedBody{Reader: io.LimitReader(resp.Body, maxErrorBody), Closer: resp.Body}
		return resp, nil
	}
	if budget != nil && strings.HasSuffix(req.URL.Path, "/tags/list") {
		resp.Body = &budgetBody{ReadCloser: resp.Body, budget: budget}
	}
	if err := boundManifest(req, resp); err != nil {
		return nil, err
	}
	if resp.Header.Get("Link") == "" || resp.Request == nil {
		return resp, nil
	}
	if err := sameHostLink(resp); err != nil {
		_ = resp.Body.Close()
		return nil, err
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

// sameHostLink refuses a Link header whose next page is on another host
// than the answer's, resolved as go-containerregistry resolves it.
func sameHostLink(resp *http.Response) error {
	link := resp.Header.Get("Link")
	start, end := strings.Index(link, "<"), strings.Index(link, ">")
	if start != 0 || end < 0 {
		return nil // go-containerregistry refuses it
	}
	next, err := url.Parse(link[1:end])
	if err != nil {
		return nil // go-containerregistry refuses it
	}
	next = resp.Request.URL.ResolveReference(next)
	if next.Host != resp.Request.URL.Host {
		return fmt.Errorf("%w: the registry %s sent a Link to the next page of tags on another host, %s", ErrInvalidConfig, resp.Request.URL.Host, next.Host)
	}
	return nil
}

// limitedBody reads a bounded part of a body and closes the whole.
type limitedBody struct {
	io.Reader
	io.Closer
}

// budgetBody spends a tag list's byte budget as it is read and fails once
// it is spent.
type budgetBody struct {
	io.ReadCloser
	budget *tagListBounds
}

func (b *budgetBody) Read(p []byte) (int, error) {
	if b.budget.bytes <= 0 {
		return 0, fmt.Errorf("%w: more than its byte bound", ErrTagListTooLarge)
	}
	if int64(len(p)) > b.budget.bytes {
		p = p[:b.budget.bytes]
	}
	n, err := b.ReadCloser.Read(p)
	b.budget.bytes -= int64(n)
	b.budget.separators -= bytes.Count(p[:n], []byte{','})
	if b.budget.separators < 0 {
		return n, fmt.Errorf("%w: more than %d tags", ErrTagListTooLarge, b.budget.tags)
	}
	return n, err
}
