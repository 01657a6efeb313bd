package notes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/uprev-dev/uprev/internal/outbound"
)

// Limits of a fetch.
const (
	// maxAnswerBytes bounds one answer of a forge's API.
	maxAnswerBytes = 16 << 20
	// maxPages bounds the release pages read for one change.
	maxPages = 10
	// perPage is the releases asked for per page, the most GitHub gives.
	perPage = 100
	// maxCached bounds the changes whose releases are kept.
	maxCached = 512
	// failureTTL is how long a failed fetch is remembered, so that a
	// forge that fails is not asked again at every run.
	failureTTL = 10 * time.Minute
)

// API is a forge's API that serves a source host's releases.
type API struct {
	// Kind is the forge: GitHub (the default), GitLab or Gitea.
	Kind Kind
	// URL is the API's root: GitHub's https://api.github.com/, or a GitHub
	// Enterprise Server's https://<host>/api/v3/ (added when missing);
	// GitLab's https://<host>/api/v4; a Gitea server's https://<host>.
	URL string
	// Token authenticates the calls, when set; Username and Password do
	// instead, when Token is not set and Username is. They are sent only
	// in a header, and only to the API's own host: a redirect or a link
	// to another host never carries them.
	Token              string
	Username, Password string
}

// fingerprint is a hash of the API's credentials, "" without any.
func (a API) fingerprint() string {
	if a.Token == "" && a.Username == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(a.Token + "\x00" + a.Username + "\x00" + a.Password))
	return hex.EncodeToString(sum[:8])
}

// Fetcher fetches the releases between two versions of a source and
// keeps them per source and versions, so that a release page is read once
// across runs. It is safe for concurrent use.
type Fetcher struct {
	client *http.Client
	clock  clock.PassiveClock

	mu      sync.Mutex
	cache   map[string]cached
	order   []string
	fetched int
}

// cached is the outcome of one fetch.
type cached struct {
	value any
	err   error
	at    time.Time
}

// NewFetcher returns a Fetcher that calls forges' APIs through client,
// the outbound layer's (outbound.Denylist.Client), with the deny list and
// a deadline. clk tells when a failure may be retried; nil is the wall
// clock.
func NewFetcher(client *http.Client, clk clock.PassiveClock) *Fetcher {
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := outbound.NewClient(boundedTransport{next: client.Transport}, client.CheckRedirect)
	c.Timeout = client.Timeout
	return &Fetcher{client: c, clock: clk, cache: map[string]cached{}}
}

// GitHubAPI is GitHub's public REST API, which serves the releases of
// sources on github.com.
var GitHubAPI = API{URL: "https://api.github.com/"}

// SourceHost returns the host of a source's web address, "" when it is not
// one.
func SourceHost(source string) string {
	host, _, _, err := repository(source)
	if err != nil {
		return ""
	}
	return host
}

// Pages returns the number of requests made so far: release pages, and
// changelogs read as a fallback.
func (f *Fetcher) Pages() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fetched
}

// ErrNoAPI is wrapped by the error of a source whose host has no known
// releases API.
var ErrNoAPI = errors.New("no releases API known for the source's host")

// Releases returns the releases of the source repository (its web
// address, such as https://github.com/acme/agent) after version old up to
// version new, newest first, each body within MaxChangeBytes, read from
// api (whose URL is empty when no API is known for the source's host).
func (f *Fetcher) Releases(ctx context.Context, api API, source, old, new string) ([]Release, error) {
	key := api.URL + "\x00" + api.fingerprint() + "\x00" + source + "\x00" + old + "\x00" + new
	v, err := f.Remember(key, func() (any, error) { return f.fetch(ctx, api, source, old, new) })
	releases, _ := v.([]Release)
	return releases, err
}

// Remember returns what fetch gives, kept under key with the releases
// (at most 512 keys in all), so that what is read of a source for one
// change is read once across runs; a failure is kept for 10 minutes. The
// key names the source, the change and the credentials it is read with,
// so that what one object's credentials read is not given to another.
func (f *Fetcher) Remember(key string, fetch func() (any, error)) (any, error) {
	f.mu.Lock()
	c, ok := f.cache[key]
	f.mu.Unlock()
	if ok && (c.err == nil || f.clock.Since(c.at) < failureTTL) {
		return c.value, c.err
	}
	value, err := fetch()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cache[key]; !ok {
		f.order = append(f.order, key)
	}
	f.cache[key] = cached{value: value, err: err, at: f.clock.Now()}
	for len(f.order) > maxCached {
		delete(f.cache, f.order[0])
		f.order = f.order[1:]
	}
	return value, err
}

// fetch reads the releases of source page by page, newest first, until
// a page reaches the old version; when none is between the two versions,
// the sections of the repository's CHANGELOG.md that are.
func (f *Fetcher) fetch(ctx context.Context, api API, source, old, new string) ([]Release, error) {
	host, owner, repo, err := repository(source)
	if err != nil {
		return nil, err
	}
	if api.URL == "" {
		return nil, fmt.Errorf("%w: %s", ErrNoAPI, host)
	}
	forge, err := f.forgeOf(ctx, api, source, owner, repo)
	if err != nil {
		return nil, err
	}
	span := newSpan(old, new)
	var out []Release
	for page := 1; page <= maxPages; page++ {
		list, next, err := forge.releases(ctx, page)
		f.count()
		if err != nil {
			return nil, fmt.Errorf("listing the releases of %s/%s: %w", owner, repo, err)
		}
		done := false
		for _, r := range list {
			in, past := span.place(r.Tag)
			if in {
				r.Body = cutAtLine(r.Body, MaxChangeBytes)
				out = append(out, r)
			}
			done = done || past
		}
		if done || !next {
			break
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	return f.changelog(ctx, forge, source, old, new)
}

// count counts one request to a forge.
func (f *Fetcher) count() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetched++
}

// repository splits a source's web address into host, owner and name.
func repository(source string) (host, owner, name string, err error) {
	u, err := url.Parse(strings.TrimSpace(source))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", "", "", fmt.Errorf("source %q is not an http(s) address", source)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", "", "", fmt.Errorf("source %q does not name a repository (host/owner/name)", source)
	}
	return u.Host, parts[0], strings.TrimSuffix(parts[1], ".git"), nil
}

// CompareURL is the web page that compares two revisions of source, or ""
// when either is unknown or source is not a repository's address.
func CompareURL(source, oldRevision, newRevision string) string {
	if oldRevision == "" || newRevision == "" || oldRevision == newRevision {
		return ""
	}
	host, owner, name, err := repository(source)
	if err != nil || !isRevision(oldRevision) || !isRevision(newRevision) {
		return ""
	}
	scheme, _, _ := strings.Cut(source, "://")
	return fmt.Sprintf("%s://%s/%s/%s/compare/%s...%s", strings.ToLower(scheme), host, owner, name, oldRevision, newRevision)
}

// CompareTagsURL is the web page that compares two tags of source, or ""
// when either is empty or not a plain tag name, or source is not a
// repository's address.
func CompareTagsURL(source, oldTag, newTag string) string {
	if oldTag == "" || newTag == "" || oldTag == newTag || !isTag(oldTag) || !isTag(newTag) {
		return ""
	}
	host, owner, name, err := repository(source)
	if err != nil {
		return ""
	}
	scheme, _, _ := strings.Cut(source, "://")
	return fmt.Sprintf("%s://%s/%s/%s/compare/%s...%s", strings.ToLower(scheme), host, owner, name, oldTag, newTag)
}

// isTag says whether s is a tag name made of letters, digits and . _ - +
// only, safe in a link.
func isTag(s string) bool {
	if len(s) > 128 {
		return false
	}
	for _, r := range s {
		allowed := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-+", r)
		if !allowed {
			return false
		}
	}
	return true
}

// isRevision says whether s is a commit hash.
func isRevision(s string) bool {
	if len(s) < 7 || len(s) > 64 {
		return false
	}
	return strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// boundedTransport refuses an answer longer than maxAnswerBytes.
type boundedTransport struct{ next http.RoundTripper }

// RoundTrip sends req and bounds the answer's body.
func (t boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{r: io.LimitReader(resp.Body, maxAnswerBytes+1), c: resp.Body}
	return resp, nil
}

// boundedBody fails a read past maxAnswerBytes.
type boundedBody struct {
	r io.Reader
	c io.Closer
	n int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > maxAnswerBytes {
		return n, fmt.Errorf("answer larger than %d MiB", maxAnswerBytes>>20)
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.c.Close() }
