// Package registry starts an in-process OCI registry for tests:
// go-containerregistry's pkg/registry behind an httptest server.
//
// On top of the plain registry it can require basic auth, serve TLS (and
// require client certificates), page tag lists with RFC 5988 Link headers,
// answer the next requests with 429 Too Many Requests, and count the
// requests it received by kind, so that tests can assert how politely a
// client behaves ("one scan = the tag-list pages + at most one digest
// lookup").
//
// The push helpers (PushImage, PushTags) write straight into the registry
// handler, in process: they bypass auth, throttling and the request counts,
// so the counts only ever show what the client under test did.
package registry

import (
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
)

// Option configures a Registry started by Start.
type Option func(*options)

type options struct {
	username, password string
	tls                bool
	clientCerts        bool
	pageSize           int
	noManifestHead     bool
	tagListDelay       time.Duration
	wrap               func(http.Handler) http.Handler
}

// WithBasicAuth makes the registry require HTTP basic auth with the given
// credentials. Requests without them, or with others, get 401 and a
// `WWW-Authenticate: Basic` challenge.
func WithBasicAuth(username, password string) Option {
	return func(o *options) {
		o.username, o.password = username, password
	}
}

// WithTLS serves the registry over HTTPS with a certificate signed by a test
// CA, available as Registry.CACertPEM.
func WithTLS() Option {
	return func(o *options) {
		o.tls = true
	}
}

// WithClientCertificates serves the registry over HTTPS (as WithTLS) and
// requires a client certificate; a valid one is available as
// Registry.ClientCertPEM and Registry.ClientKeyPEM.
func WithClientCertificates() Option {
	return func(o *options) {
		o.tls = true
		o.clientCerts = true
	}
}

// WithTagPageSize caps the number of tags in one /v2/<name>/tags/list
// response to n, whatever the client asks for; the next page is announced
// with a `Link: <...>; rel="next"` header.
func WithTagPageSize(n int) Option {
	return func(o *options) {
		o.pageSize = n
	}
}

// WithTagListDelay makes every tag list page take d to answer, as a busy
// registry's do, counted as in flight meanwhile.
func WithTagListDelay(d time.Duration) Option {
	return func(o *options) {
		o.tagListDelay = d
	}
}

// WithWrap puts wrap around the registry's storage handler, behind auth,
// throttling and the request counts (tag lists are not passed to it): the
// test's handler answers some requests its own way (slowly, never, with
// more than the manifest declares) and passes the others on to store.
func WithWrap(wrap func(store http.Handler) http.Handler) Option {
	return func(o *options) {
		o.wrap = wrap
	}
}

// WithoutManifestHead makes the registry answer HEAD requests for manifests
// with 405 Method Not Allowed, as some registries do.
func WithoutManifestHead() Option {
	return func(o *options) {
		o.noManifestHead = true
	}
}

// Counts is the number of requests a Registry received, by kind. Every
// request is counted on arrival, including those answered 401 or 429.
type Counts struct {
	// Total is every request.
	Total int
	// Ping is GET /v2/, the version check clients make before anything else.
	Ping int
	// TagListPages is GET /v2/<name>/tags/list, one per page.
	TagListPages int
	// ManifestHead is HEAD /v2/<name>/manifests/<reference>.
	ManifestHead int
	// ManifestGet is GET /v2/<name>/manifests/<reference>.
	ManifestGet int
	// Referrers is GET /v2/<name>/referrers/<digest>.
	Referrers int
	// BlobGet is GET /v2/<name>/blobs/<digest>.
	BlobGet int
	// Unauthorized is the requests answered 401.
	Unauthorized int
	// Throttled is the requests answered 429 because of ThrottleNext.
	Throttled int
}

// Registry is a running in-process OCI registry.
type Registry struct {
	// URL is the base URL, e.g. https://127.0.0.1:40123.
	URL string
	// CACertPEM is the PEM certificate of the CA that signed the server
	// certificate; nil without TLS.
	CACertPEM []byte
	// ClientCertPEM and ClientKeyPEM are a client certificate and its key
	// that the registry accepts; nil unless WithClientCertificates.
	ClientCertPEM, ClientKeyPEM []byte

	opts   options
	server *httptest.Server
	// store is the go-containerregistry registry handler holding the data.
	store http.Handler
	// served is store, or store wrapped (WithWrap): what serves the
	// requests counted.
	served http.Handler

	counts   counters
	inFlight atomic.Int64
	maxSeen  atomic.Int64

	mu         sync.Mutex
	throttleN  int
	retryAfter string
	gate       chan struct{}
	// sortedTags caches the sorted tags of each repository for paging; any
	// request that can change the registry clears it.
	sortedTags map[string][]string
}

type counters struct {
	total, ping, tagPages, head, get, referrers, blobs, unauthorized, throttled atomic.Int64
}

// Start starts a registry configured by opts and stops it when the test ends.
func Start(t testing.TB, opts ...Option) *Registry {
	t.Helper()
	r, err := New(testLog{t}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// New starts a registry configured by opts on a free port of 127.0.0.1,
// for programs that are not tests (make demo); the server's own log lines
// (TLS handshake failures) go to logs. Close stops it.
func New(logs io.Writer, opts ...Option) (*Registry, error) {
	r := &Registry{
		store:      ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)), ggcrregistry.WithReferrersSupport(true)),
		sortedTags: map[string][]string{},
	}
	for _, o := range opts {
		o(&r.opts)
	}
	r.served = r.store
	if r.opts.wrap != nil {
		r.served = r.opts.wrap(r.store)
	}
	r.server = httptest.NewUnstartedServer(http.HandlerFunc(r.serveHTTP))
	r.server.Config.ErrorLog = log.New(logs, "test registry: ", 0)
	if r.opts.tls {
		if r.opts.clientCerts {
			pool, err := r.makeClientCertificate()
			if err != nil {
				return nil, fmt.Errorf("making a client certificate for the test registry: %w", err)
			}
			r.server.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
		}
		r.server.StartTLS()
		r.CACertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.server.Certificate().Raw})
	} else {
		r.server.Start()
	}
	r.URL = r.server.URL
	return r, nil
}

// Close stops the registry, releasing requests that Hold keeps waiting.
func (r *Registry) Close() {
	r.mu.Lock()
	if r.gate != nil {
		close(r.gate)
		r.gate = nil
	}
	r.mu.Unlock()
	r.server.Close()
}

// Host returns the registry's host:port, as used in image names.
func (r *Registry) Host() string {
	return strings.TrimPrefix(strings.TrimPrefix(r.URL, "https://"), "http://")
}

// Image returns the image name of repository repo in this registry, e.g.
// 127.0.0.1:40123/acme/agent.
func (r *Registry) Image(repo string) string {
	return r.Host() + "/" + repo
}

// Counts returns the requests received so far, by kind.
func (r *Registry) Counts() Counts {
	return Counts{
		Total:        int(r.counts.total.Load()),
		Ping:         int(r.counts.ping.Load()),
		TagListPages: int(r.counts.tagPages.Load()),
		ManifestHead: int(r.counts.head.Load()),
		ManifestGet:  int(r.counts.get.Load()),
		Referrers:    int(r.counts.referrers.Load()),
		BlobGet:      int(r.counts.blobs.Load()),
		Unauthorized: int(r.counts.unauthorized.Load()),
		Throttled:    int(r.counts.throttled.Load()),
	}
}

// ResetCounts sets all request counts, and the maximum seen in flight, to 0.
func (r *Registry) ResetCounts() {
	for _, c := range []*atomic.Int64{&r.counts.total, &r.counts.ping, &r.counts.tagPages, &r.counts.head, &r.counts.get, &r.counts.referrers, &r.counts.blobs, &r.counts.unauthorized, &r.counts.throttled} {
		c.Store(0)
	}
	r.maxSeen.Store(r.inFlight.Load())
}

// ThrottleNext makes the next n requests answer 429 Too Many Requests, with
// a Retry-After header set to retryAfter (seconds, or an HTTP date) unless
// it is empty.
func (r *Registry) ThrottleNext(n int, retryAfter string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.throttleN, r.retryAfter = n, retryAfter
}

// Hold makes every request that arrives from now on wait, counted as in
// flight, until release is called (or the test ends). Together with InFlight
// and MaxInFlight it lets a test observe a client's concurrency.
func (r *Registry) Hold() (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gate := make(chan struct{})
	r.gate = gate
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.gate == gate {
				close(gate)
				r.gate = nil
			}
		})
	}
}

// InFlight returns the number of requests being served right now.
func (r *Registry) InFlight() int {
	return int(r.inFlight.Load())
}

// MaxInFlight returns the largest number of requests served at the same
// time since the start (or the last ResetCounts).
func (r *Registry) MaxInFlight() int {
	return int(r.maxSeen.Load())
}

func (r *Registry) serveHTTP(w http.ResponseWriter, req *http.Request) {
	n := r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	for {
		seen := r.maxSeen.Load()
		if n <= seen || r.maxSeen.CompareAndSwap(seen, n) {
			break
		}
	}
	r.count(req)

	r.mu.Lock()
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}

	if r.opts.username != "" {
		user, pass, ok := req.BasicAuth()
		if !ok || user != r.opts.username || pass != r.opts.password {
			r.counts.unauthorized.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="uprev-test-registry"`)
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
			return
		}
	}
	r.mu.Lock()
	throttle := r.throttleN > 0
	if throttle {
		r.throttleN--
	}
	retryAfter := r.retryAfter
	r.mu.Unlock()
	if throttle {
		r.counts.throttled.Add(1)
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		writeError(w, http.StatusTooManyRequests, "TOOMANYREQUESTS", "too many requests")
		return
	}
	if r.opts.noManifestHead && req.Method == http.MethodHead && strings.Contains(req.URL.Path, "/manifests/") {
		w.Header().Set("Allow", "GET, PUT, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if repo, ok := tagListRepo(req); ok {
		if d := r.opts.tagListDelay; d > 0 {
			select {
			case <-time.After(d):
			case <-req.Context().Done():
				return
			}
		}
		r.serveTags(w, req, repo)
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		r.forgetTags()
	}
	r.served.ServeHTTP(w, req)
}

func (r *Registry) count(req *http.Request) {
	r.counts.total.Add(1)
	path := strings.TrimSuffix(req.URL.Path, "/")
	switch {
	case path == "/v2":
		r.counts.ping.Add(1)
	case strings.HasSuffix(path, "/tags/list"):
		r.counts.tagPages.Add(1)
	case strings.Contains(path, "/manifests/") && req.Method == http.MethodHead:
		r.counts.head.Add(1)
	case strings.Contains(path, "/manifests/") && req.Method == http.MethodGet:
		r.counts.get.Add(1)
	case strings.Contains(path, "/referrers/") && req.Method == http.MethodGet:
		r.counts.referrers.Add(1)
	case strings.Contains(path, "/blobs/") && req.Method == http.MethodGet:
		r.counts.blobs.Add(1)
	}
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`, code, message)
}
