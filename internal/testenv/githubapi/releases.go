package githubapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Release is one release of the stand-in, as GitHub's API returns it (the
// fields uprev reads).
type Release struct {
	TagName    string `json:"tag_name"`
	Name       string `json:"name"`
	HTMLURL    string `json:"html_url"`
	Draft      bool   `json:"draft"`
	Prerelease bool   `json:"prerelease"`
	Body       string `json:"body,omitempty"`
}

// Releases is a stand-in for GitHub's "List releases" endpoint
// (GET /repos/{owner}/{repo}/releases), following its documented contract:
// newest first; per_page (default 30, at most 100) and page; a Link header
// with rel="next" and rel="last" while more pages follow; a strong ETag per
// answer, and 304 Not Modified for a request whose If-None-Match matches it,
// which does not count against the rate limit; X-RateLimit-Limit,
// -Remaining, -Used and -Reset on every answer, and 403 "API rate limit
// exceeded" once the limit is used up. It answers under /api/v3/ too, as
// GitHub Enterprise Server does. With a token set (a private repository),
// a request with another Authorization is answered 401 "Bad credentials",
// and one without any 404, as GitHub hides private repositories from
// anonymous requests.
type Releases struct {
	// URL is the API's base URL (the githubReleases.url of a source).
	URL string

	mu       sync.Mutex
	hang     bool
	repos    map[string][]Release
	token    string
	limit    int
	used     int
	reset    time.Time
	requests []*http.Request
}

// StartReleases starts the stand-in, with a rate limit of 5,000 requests an
// hour as GitHub's for an authenticated user, and stops it when the test
// ends.
func StartReleases(t testing.TB) *Releases {
	t.Helper()
	r, stop := ServeReleases()
	t.Cleanup(stop)
	return r
}

// ServeReleases starts the stand-in as StartReleases does, for a whole
// test binary (TestMain); stop stops it.
func ServeReleases() (r *Releases, stop func()) {
	r = &Releases{repos: map[string][]Release{}, limit: 5000, reset: time.Now().Add(time.Hour)}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = srv.URL
	return r, srv.Close
}

// SetReleases sets the releases of repository (owner/name), newest first.
func (r *Releases) SetReleases(repository string, releases ...Release) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.repos[repository] = releases
}

// RequireToken makes every request need `Authorization: Bearer token`, as
// a private repository's do.
func (r *Releases) RequireToken(token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.token = token
}

// SetRateLimit sets the requests left until reset.
func (r *Releases) SetRateLimit(remaining int, reset time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.used = r.limit - remaining
	r.reset = reset
}

// Hang makes every later request wait, unanswered, until its client gives
// up: a host that accepts connections and never answers.
func (r *Releases) Hang() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hang = true
}

// Requests returns the requests served so far, with their headers.
func (r *Releases) Requests() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*http.Request(nil), r.requests...)
}

func (r *Releases) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.Clone(req.Context()))
	if r.hang {
		r.mu.Unlock()
		<-req.Context().Done()
		return
	}
	defer r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	switch auth := req.Header.Get("Authorization"); {
	case r.token == "" || auth == "Bearer "+r.token:
	case auth == "":
		// A private repository does not exist for an anonymous request.
		writeError(w, http.StatusNotFound, "Not Found")
		return
	default:
		writeError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	rest, ok := strings.CutPrefix(strings.TrimPrefix(req.URL.Path, "/api/v3"), "/repos/")
	repository, ok2 := strings.CutSuffix(rest, "/releases")
	releases, known := r.repos[repository]
	if req.Method != http.MethodGet || !ok || !ok2 || !known {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	perPage := queryInt(req, "per_page", 30)
	perPage = min(max(perPage, 1), 100)
	page := max(queryInt(req, "page", 1), 1)
	from := min((page-1)*perPage, len(releases))
	to := min(from+perPage, len(releases))
	body, err := json.Marshal(releases[from:to])
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	if last := (len(releases) + perPage - 1) / perPage; page < last {
		link := func(p int) string {
			return fmt.Sprintf("<http://%s%s?per_page=%d&page=%d>", req.Host, req.URL.Path, perPage, p)
		}
		w.Header().Set("Link", link(page+1)+`; rel="next", `+link(last)+`; rel="last"`)
	}
	if req.Header.Get("If-None-Match") == etag {
		r.rateHeaders(w)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.used >= r.limit {
		r.rateHeaders(w)
		writeError(w, http.StatusForbidden, "API rate limit exceeded for user ID 1.")
		return
	}
	r.used++
	r.rateHeaders(w)
	_, _ = w.Write(body)
}

// rateHeaders writes GitHub's rate-limit headers.
func (r *Releases) rateHeaders(w http.ResponseWriter) {
	w.Header().Set("X-RateLimit-Limit", strconv.Itoa(r.limit))
	w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(max(r.limit-r.used, 0)))
	w.Header().Set("X-RateLimit-Used", strconv.Itoa(r.used))
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(r.reset.Unix(), 10))
	w.Header().Set("X-RateLimit-Resource", "core")
}

func queryInt(req *http.Request, name string, def int) int {
	if v, err := strconv.Atoi(req.URL.Query().Get(name)); err == nil {
		return v
	}
	return def
}
