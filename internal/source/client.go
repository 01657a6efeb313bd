package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/registry"
)

var (
	// ErrInvalidConfig means the source's settings or its Secrets cannot
	// work as written; retrying without a change will not help.
	ErrInvalidConfig = errors.New("invalid source configuration")
	// ErrUnreachable means the server could not be read: a network error,
	// a timeout, an HTTP error status. Worth retrying.
	ErrUnreachable = errors.New("source unreachable")
	// ErrTimeout, with ErrUnreachable, means the server gave no answer
	// within the source's timeout.
	ErrTimeout = errors.New("within the source's timeout")
	// ErrUnauthorized means the server refused the credentials (HTTP 401
	// or 403 without a rate limit).
	ErrUnauthorized = errors.New("source refused the credentials")
	// ErrInvalidResponse means the server answered with something that is
	// not the source's format: HTML for a JSON feed, an index.yaml that
	// does not parse, a redirect to another host, an answer past the size
	// bound.
	ErrInvalidResponse = errors.New("invalid answer from the source")
	// ErrNotListed means the answer is valid but does not list what the
	// source names: a chart missing from a Helm repository's index.
	ErrNotListed = errors.New("not listed by the source")
)

// RateLimitError means the server asked to wait before the next request
// (GitHub's primary or secondary rate limit, HTTP 429 with Retry-After).
type RateLimitError struct {
	// Host is the server's host.
	Host string
	// RetryAfter is how long it asked to wait.
	RetryAfter time.Duration
}

// Error names the host and the wait.
func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%s rate-limits its API: next request allowed in %s", e.Host, e.RetryAfter.Round(time.Second))
}

// Defaults of Options and Access.
const (
	// DefaultMaxBytes bounds one answer: an index.yaml, a page of
	// releases, a JSON document. 32 MiB holds the index of a repository
	// of tens of thousands of chart versions.
	DefaultMaxBytes = 32 << 20
	// DefaultTimeout bounds one scan of a source whose Access has no
	// Timeout.
	DefaultTimeout = 60 * time.Second
	// maxRedirects bounds the redirects one request follows.
	maxRedirects = 5
	// maxErrorBody is how much of an error answer is read into a message.
	maxErrorBody = 256
)

// Options configure a Client. Zero values take the defaults given.
type Options struct {
	// DenyCIDRs are address ranges no connection may go to
	// (--registry-deny-cidrs), checked on the resolved address when a
	// connection is dialled.
	DenyCIDRs outbound.Denylist
	// MaxBytes bounds every answer. Default DefaultMaxBytes.
	MaxBytes int64
	// MaxAssetBytes bounds every asset. Default DefaultMaxAssetBytes.
	MaxAssetBytes int64
	// UserAgent is sent with every request. Default "uprev".
	UserAgent string
	// Clock tells the time, for rate-limit resets. Default the wall
	// clock.
	Clock clock.PassiveClock
}

// Access is how one source reaches its server: the data of the Secrets it
// references and its timeout.
type Access struct {
	// Secret holds username and password, or bearerToken (Flux's keys),
	// sent to the source's own host only.
	Secret map[string][]byte
	// CertSecret holds ca.crt and optionally tls.crt and tls.key.
	CertSecret map[string][]byte
	// Timeout bounds the whole scan; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Client reads sources. Make one per process; it is safe for concurrent
// use. It keeps, per source and URL, the validators (ETag, Last-Modified)
// and what the last full answer gave, so that an unchanged answer is not
// read or parsed again.
type Client struct {
	opts Options
	base *http.Transport

	mu    sync.Mutex
	known map[string]known
}

// known is what a Client remembers of one URL of one source.
type known struct {
	etag, lastModified string
	value              any
	next               string
}

// NewClient returns a Client configured by opts.
func NewClient(opts Options) *Client {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxAssetBytes <= 0 {
		opts.MaxAssetBytes = DefaultMaxAssetBytes
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "uprev"
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Client{
		opts:  opts,
		base:  opts.DenyCIDRs.Transport(),
		known: map[string]known{},
	}
}

// Forget drops what the Client remembers of the source key (a deleted
// object).
func (c *Client) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.known {
		if strings.HasPrefix(k, key+"\x00") {
			delete(c.known, k)
		}
	}
}

// session is one scan of one source: its HTTP client, credentials,
// deadline and the key its answers are remembered under.
type session struct {
	c      *Client
	key    string
	http   *http.Client
	secret map[string][]byte
	host   string
	// unremembered reads answers in full and keeps nothing of them, for
	// reads whose caller keeps what it needs (release notes).
	unremembered bool
}

// withTimeout returns ctx bounded by the access's timeout.
func (a Access) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	d := a.Timeout
	if d <= 0 {
		d = DefaultTimeout
	}
	return context.WithTimeout(ctx, d)
}

// session starts a scan of the source key, whose server is at rawURL.
func (c *Client) session(key, rawURL string, access Access) (*session, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%w: %q is not an http(s) URL", ErrInvalidConfig, RedactURL(rawURL))
	}
	return c.sessionOn(key, u.Host, access)
}

// sessionOn starts a scan of the source key whose credentials belong to
// host.
func (c *Client) sessionOn(key, host string, access Access) (*session, error) {
	if err := checkSecret(access.Secret); err != nil {
		return nil, err
	}
	transport := c.base
	if len(access.CertSecret) > 0 {
		tlsCfg, err := registry.TLSConfig(access.CertSecret)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		transport = c.base.Clone()
		transport.TLSClientConfig = tlsCfg
	}
	s := &session{c: c, secret: access.Secret, host: host}
	// The key names the credentials too: other credentials may see
	// another answer.
	s.key = key + "\x00" + secretFingerprint(access)
	s.http = outbound.NewClient(transport, s.checkRedirect)
	return s, nil
}

// checkRedirect follows redirects on the source's own host only, and never
// from https to http: credentials and the answer's trust stay with the host
// the spec names.
func (s *session) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrInvalidResponse, maxRedirects)
	}
	prev := via[len(via)-1].URL
	if req.URL.Host != s.host || (prev.Scheme == "https" && req.URL.Scheme != "https") {
		return fmt.Errorf("%w: %s redirects to %s://%s, another host or scheme; only redirects on %s are followed",
			ErrInvalidResponse, prev.Host, req.URL.Scheme, req.URL.Host, s.host)
	}
	return nil
}

// checkSecret refuses a Secret with both a token and a username or
// password, or a password without a username.
func checkSecret(data map[string][]byte) error {
	user, pass, token := data[gitrepo.SecretUsername], data[gitrepo.SecretPassword], data[gitrepo.SecretBearerToken]
	switch {
	case len(token) > 0 && (len(user) > 0 || len(pass) > 0):
		return fmt.Errorf("%w: the secret holds both %s and %s/%s", ErrInvalidConfig, gitrepo.SecretBearerToken, gitrepo.SecretUsername, gitrepo.SecretPassword)
	case len(pass) > 0 && len(user) == 0:
		return fmt.Errorf("%w: the secret holds %s without %s", ErrInvalidConfig, gitrepo.SecretPassword, gitrepo.SecretUsername)
	}
	return nil
}

// authorize adds the source's credentials to req, which goes to the
// source's own host.
func (s *session) authorize(req *http.Request) {
	if token := s.secret[gitrepo.SecretBearerToken]; len(token) > 0 {
		req.Header.Set("Authorization", "Bearer "+string(token))
		return
	}
	if user := s.secret[gitrepo.SecretUsername]; len(user) > 0 {
		req.SetBasicAuth(string(user), string(s.secret[gitrepo.SecretPassword]))
	}
}

// secretFingerprint is a hash of the access's credentials, so that what
// was remembered with some credentials is not answered for others.
func secretFingerprint(a Access) string {
	h := sha256.New()
	for _, data := range []map[string][]byte{a.Secret, a.CertSecret} {
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range data {
				if !yield(k) {
					return
				}
			}
		}) {
			_, _ = fmt.Fprintf(h, "%s=%x;", k, sha256.Sum256(data[k])) // a hash's writes never fail
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// answer is a parsed answer: the value parse made and, for paged lists,
// the next page's URL.
type answer struct {
	value any
	next  string
}

// get reads rawURL conditionally: when an earlier answer of it (parsed for
// the same variant, such as a chart's name) is remembered, the request carries its validators, and a 304 gives back
// what parse made of it then. Otherwise the body, bounded by MaxBytes, goes
// to parse, and the result is remembered with the new validators.
func (s *session) get(ctx context.Context, rawURL, variant string, headers map[string]string, parse func(*http.Response, []byte) (answer, error)) (a answer, notModified bool, err error) {
	memo := s.key + "\x00" + rawURL + "\x00" + variant
	s.c.mu.Lock()
	prev, remembered := s.c.known[memo]
	s.c.mu.Unlock()
	remembered = remembered && !s.unremembered

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return answer{}, false, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	req.Header.Set("User-Agent", s.c.opts.UserAgent)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if remembered {
		if prev.etag != "" {
			req.Header.Set("If-None-Match", prev.etag)
		}
		if prev.lastModified != "" {
			req.Header.Set("If-Modified-Since", prev.lastModified)
		}
	}
	s.authorize(req)
	resp, err := s.http.Do(req)
	if err != nil {
		return answer{}, false, s.requestError(ctx, rawURL, err)
	}
	defer func() { _ = resp.Body.Close() }() // read only
	if err := s.checkRateLimit(resp); err != nil {
		return answer{}, false, err
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && remembered:
		return answer{value: prev.value, next: prev.next}, true, nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return answer{}, false, fmt.Errorf("%w: GET %s: HTTP %d", ErrUnauthorized, RedactURL(rawURL), resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return answer{}, false, fmt.Errorf("%w: GET %s: HTTP %d%s", ErrUnreachable, RedactURL(rawURL), resp.StatusCode, errorText(resp.Body))
	}
	body, err := s.c.readBounded(resp)
	if err != nil {
		if ctx.Err() != nil {
			return answer{}, false, s.requestError(ctx, rawURL, err)
		}
		return answer{}, false, fmt.Errorf("reading %s: %w", RedactURL(rawURL), err)
	}
	a, err = parse(resp, body)
	if err != nil {
		return answer{}, false, fmt.Errorf("reading %s: %w", RedactURL(rawURL), err)
	}
	etag, lastModified := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	s.c.mu.Lock()
	switch {
	case s.unremembered:
	case etag != "" || lastModified != "":
		s.c.known[memo] = known{etag: etag, lastModified: lastModified, value: a.value, next: a.next}
	default:
		delete(s.c.known, memo)
	}
	s.c.mu.Unlock()
	return a, false, nil
}

// Fingerprint is a hash of the access's credentials, so that what was read
// with some credentials is kept apart from what others may read.
func (a Access) Fingerprint() string { return secretFingerprint(a) }
