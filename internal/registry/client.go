package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"k8s.io/utils/clock"

	"github.com/uprev-dev/uprev/internal/outbound"
)

// ScannerOptions configure a Scanner. Zero values take the defaults given.
type ScannerOptions struct {
	// MaxConcurrentPerHost is the number of requests in flight to one
	// registry host at a time, across all Clients. Default 4.
	MaxConcurrentPerHost int
	// RequestsPerSecond limits the rate of requests to one registry host;
	// 0 means no rate limit.
	RequestsPerSecond float64
	// Burst is the number of requests that may go above RequestsPerSecond at
	// once. Default 1.
	Burst int
	// MaxAttempts is the number of attempts for a request answered 429, 502,
	// 503 or 504. Default 5.
	MaxAttempts int
	// BaseBackoff is the first wait before a retry when the registry sends
	// no Retry-After; it doubles per attempt. Default 1s.
	BaseBackoff time.Duration
	// MaxBackoff caps the backoff. Default 30s.
	MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After that is waited for within a
	// scan; a longer one fails the request with ErrTransient. Default 2m.
	MaxRetryAfter time.Duration
	// PageSize is the number of tags asked for per tag-list page (the
	// registry may send fewer). Default 1000.
	PageSize int
	// UserAgent is sent with every request. Default "uprev".
	UserAgent string
	// Metrics, when set, records every request.
	Metrics *Metrics
	// Clock is the time source of retry and rate-limit waits. Default: the
	// wall clock.
	Clock clock.WithTicker
	// DenyCIDRs are address ranges no registry connection may go to
	// (--registry-deny-cidrs), checked on the resolved address when a
	// connection is dialled. Empty denies nothing.
	DenyCIDRs outbound.Denylist
	// MaxTags is the most tags one tag list may hold. Default
	// DefaultMaxTags.
	MaxTags int
	// MaxTagListBytes is the most bytes the pages of one tag list may
	// hold together. Default DefaultMaxTagListBytes.
	MaxTagListBytes int64
	// MaxTagListPages is the most pages one tag list may take. Default
	// DefaultMaxTagListPages.
	MaxTagListPages int
}

// Scanner is what all registry access in a process shares: per-host limits,
// retry policy, metrics and the default HTTP transport. Make one per process
// and a Client per ImageRepository with Scanner.Client. It is safe for
// concurrent use.
type Scanner struct {
	opts  ScannerOptions
	clock clock.WithTicker
	// slots are the per-host request slots of every Client.
	slots *outbound.HostSlots
	// base is the transport of Clients without their own TLS or proxy
	// settings, shared so that their connections are reused.
	base http.RoundTripper
}

// NewScanner returns a Scanner configured by opts.
func NewScanner(opts ScannerOptions) *Scanner {
	if opts.MaxConcurrentPerHost <= 0 {
		opts.MaxConcurrentPerHost = 4
	}
	if opts.Burst <= 0 {
		opts.Burst = 1
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.BaseBackoff <= 0 {
		opts.BaseBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.MaxRetryAfter <= 0 {
		opts.MaxRetryAfter = 2 * time.Minute
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 1000
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "uprev"
	}
	if opts.MaxTags <= 0 {
		opts.MaxTags = DefaultMaxTags
	}
	if opts.MaxTagListBytes <= 0 {
		opts.MaxTagListBytes = DefaultMaxTagListBytes
	}
	if opts.MaxTagListPages <= 0 {
		opts.MaxTagListPages = DefaultMaxTagListPages
	}
	s := &Scanner{opts: opts, clock: opts.Clock}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	s.slots = &outbound.HostSlots{PerHost: opts.MaxConcurrentPerHost, RequestsPerSecond: opts.RequestsPerSecond, Burst: opts.Burst, Clock: s.clock}
	s.base = s.chain(s.opts.DenyCIDRs.Transport(), "")
	return s
}

// Bounds of a tag list: past any of them ListTags fails with
// ErrTagListTooLarge.
const (
	// DefaultMaxTags is the most tags one repository's list may hold.
	DefaultMaxTags = 100_000
	// DefaultMaxTagListBytes is the most bytes all pages of one tag list
	// may take together: 16 MiB, room for DefaultMaxTags tags of the
	// longest a tag may be (128 characters, quoted, with a comma: 13 MB).
	DefaultMaxTagListBytes = 16 << 20
	// DefaultMaxTagListPages is the most pages one tag list may take.
	DefaultMaxTagListPages = 1_000
)

// DefaultTimeout bounds a ListTags, Digest or ReadArtifact call whose
// Access has no Timeout.
const DefaultTimeout = time.Minute

// chain wraps base in the etiquette transports: retry outermost, so that a
// request waiting to be retried holds no slot, then the per-host limits
// (per host and proxy: via is the address of the proxy base goes through,
// empty for none), then the metrics, which see every attempt.
func (s *Scanner) chain(base http.RoundTripper, via string) http.RoundTripper {
	next := base
	if s.opts.Metrics != nil {
		next = &metricsTransport{next: next, metrics: s.opts.Metrics, clock: s.clock}
	}
	next = s.slots.Wrap(next, via)
	return &retryTransport{
		next:        next,
		clock:       s.clock,
		maxAttempts: s.opts.MaxAttempts,
		baseBackoff: s.opts.BaseBackoff,
		maxBackoff:  s.opts.MaxBackoff,
		maxWait:     s.opts.MaxRetryAfter,
	}
}

// Access is how one ImageRepository reaches its registry: the data of the
// Secrets it references and its spec settings.
type Access struct {
	// PullSecrets are the data of dockerconfigjson Secrets (key
	// .dockerconfigjson, or .dockercfg for the legacy type): spec.secretRef
	// and the imagePullSecrets of spec.serviceAccountName.
	PullSecrets []map[string][]byte
	// CertSecret is the data of spec.certSecretRef: ca.crt, and tls.crt with
	// tls.key for a client certificate.
	CertSecret map[string][]byte
	// ProxySecret is the data of spec.proxySecretRef: address, and
	// optionally username and password.
	ProxySecret map[string][]byte
	// Insecure allows plain HTTP (spec.insecure).
	Insecure bool
	// Provider is spec.provider: generic (or empty), aws, azure or gcp.
	Provider string
	// CloudCredentials authenticates to the registry of a cloud provider
	// (aws, azure, gcp) with a short-lived token; the caller obtains it
	// through the provider's workload identity. It is required for those
	// providers and replaces PullSecrets.
	CloudCredentials authn.Authenticator
	// CloudRegistry is the registry host CloudCredentials were issued
	// for: the host of the repository's image. The credentials are
	// offered to that host only.
	CloudRegistry string
	// Timeout bounds each ListTags, Digest or Artifact call (spec.timeout);
	// 0 means DefaultTimeout.
	Timeout time.Duration
}

// Client reaches registries with one ImageRepository's access settings. It
// reuses the authentication handshake across calls on the same repository,
// so a scan followed by a digest lookup pings the registry once.
type Client struct {
	puller   *remote.Puller
	insecure bool
	timeout  time.Duration
	bounds   tagListBounds
}

// Client returns a Client for access. Bad settings give an error wrapping
// ErrInvalidConfig.
func (s *Scanner) Client(ctx context.Context, access Access) (*Client, error) {
	cloud, err := IsCloudProvider(access.Provider)
	if err != nil {
		return nil, err
	}
	if err := CheckCloudSettings(access.Provider, access.Insecure, len(access.CertSecret) > 0, len(access.ProxySecret) > 0); err != nil {
		return nil, err
	}
	var auth authn.Keychain
	switch {
	case cloud && (access.CloudCredentials == nil || access.CloudRegistry == ""):
		return nil, fmt.Errorf("%w: provider %q needs cloud credentials and the registry they were issued for", ErrInvalidConfig, access.Provider)
	case cloud:
		auth = hostKeychain{host: access.CloudRegistry, auth: access.CloudCredentials}
	default:
		if auth, err = keychain(ctx, access.PullSecrets); err != nil {
			return nil, err
		}
	}
	base := s.base
	if len(access.CertSecret) > 0 || len(access.ProxySecret) > 0 {
		t := s.opts.DenyCIDRs.Transport()
		t.IdleConnTimeout = 30 * time.Second
		if t.TLSClientConfig, err = TLSConfig(access.CertSecret); err != nil {
			return nil, err
		}
		via := ""
		if len(access.ProxySecret) > 0 {
			proxy, err := ProxyURL(access.ProxySecret)
			if err != nil {
				return nil, err
			}
			t.Proxy = http.ProxyURL(proxy)
			via = proxy.Host
		}
		base = s.chain(t, via)
	}
	opts := []remote.Option{
		remote.WithTransport(&answerTransport{next: base, insecure: access.Insecure}),
		remote.WithUserAgent(s.opts.UserAgent),
		remote.WithPageSize(s.opts.PageSize),
		// Retries are the etiquette chain's job, which honours Retry-After
		// and waits on the injected clock.
		remote.WithRetryStatusCodes(),
		remote.WithRetryPredicate(func(error) bool { return false }),
	}
	if auth != nil {
		opts = append(opts, remote.WithAuthFromKeychain(auth))
	} else {
		opts = append(opts, remote.WithAuth(authn.Anonymous))
	}
	puller, err := remote.NewPuller(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	bounds := newTagListBounds(s.opts.MaxTags, s.opts.MaxTagListBytes, s.opts.MaxTagListPages)
	return &Client{puller: puller, insecure: access.Insecure, timeout: cmp.Or(access.Timeout, DefaultTimeout), bounds: bounds}, nil
}

// hostKeychain answers one registry host with the cloud credentials issued
// for it, and every other host anonymously: a Link header, a redirect or a
// caller naming another image never gets the token.
type hostKeychain struct {
	host string
	auth authn.Authenticator
}

// Resolve implements authn.Keychain.
func (k hostKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	if target.RegistryStr() != k.host {
		return authn.Anonymous, nil
	}
	return k.auth, nil
}

// ListTags returns every tag of image, following the registry's Link
// pagination on the registry's own host, within the Scanner's tag-list
// bounds.
func (c *Client) ListTags(ctx context.Context, image string) ([]string, error) {
	repo, err := parseRepository(image, c.insecure)
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	budget := c.bounds
	tags, err := c.puller.List(withTagListBudget(ctx, &budget), repo)
	if err == nil && len(tags) > c.bounds.tags {
		err = fmt.Errorf("%w: more tags than its bound", ErrTagListTooLarge)
	}
	if errors.Is(err, ErrTagListTooLarge) {
		return nil, fmt.Errorf("listing tags of %s: %w (bounds: %d tags, %d bytes, %d pages)", image, err, c.bounds.tags, c.bounds.bytes, c.bounds.pages)
	}
	if err != nil {
		return nil, fmt.Errorf("listing tags of %s: %w", image, classify(err))
	}
	return tags, nil
}

// Digest returns the digest of image:tag with one HEAD request, or a GET
// when the registry does not allow HEAD.
func (c *Client) Digest(ctx context.Context, image, tag string) (string, error) {
	desc, err := c.Describe(ctx, image, tag)
	if err != nil {
		return "", err
	}
	return desc.Digest.String(), nil
}

// Describe returns the descriptor (media type, size, digest) of the
// manifest image:reference, a tag or a digest, with one HEAD request, or a
// GET when the registry does not allow HEAD.
func (c *Client) Describe(ctx context.Context, image, reference string) (v1.Descriptor, error) {
	repo, err := parseRepository(image, c.insecure)
	if err != nil {
		return v1.Descriptor{}, err
	}
	var ref name.Reference = repo.Tag(reference)
	if strings.Contains(reference, ":") {
		ref = repo.Digest(reference)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	desc, err := c.puller.Head(ctx, ref)
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusMethodNotAllowed {
		var got *remote.Descriptor
		if got, err = c.puller.Get(ctx, ref); err == nil {
			desc = &got.Descriptor
		}
	}
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("looking up the digest of %s: %w", ref, classify(err))
	}
	return *desc, nil
}

// Timeout is how long one call may take: the Access timeout, or
// DefaultTimeout.
func (c *Client) Timeout() time.Duration { return c.timeout }

// withTimeout bounds one call by the Access timeout.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}
