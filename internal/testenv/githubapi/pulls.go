package githubapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Repository is a stand-in for the pull request endpoints of GitHub's REST
// API for one repository, as GitHub Enterprise Server serves it (under
// /api/v3/, the root go-github puts enterprise URLs at), following
// GitHub's documented contract:
//
//	GET   /repos/{owner}/{repo}/pulls?state=&head=owner:branch&base=
//	POST  /repos/{owner}/{repo}/pulls                        201, 422 when one is open
//	PATCH /repos/{owner}/{repo}/pulls/{number}
//	POST  /repos/{owner}/{repo}/issues/{number}/labels
//	POST  /repos/{owner}/{repo}/pulls/{number}/requested_reviewers
//
// Every call needs `Authorization: Bearer <token>` (or `token <token>`);
// errors are GitHub's JSON ({"message", "documentation_url"}), and a call
// made to fail with RateLimit answers as GitHub's primary rate limit does
// (403, X-RateLimit-Remaining: 0, X-RateLimit-Reset).
type Repository struct {
	// URL is the API's base URL, ending in /api/v3/, for pullRequest.url.
	URL string
	// Owner and Name name the repository.
	Owner, Name string

	token    string
	releases *Releases
	mu       sync.Mutex
	pulls    []*PullRequest
	fails    []failure
	calls    []string
}

// apiRoot is where GitHub Enterprise Server serves its REST API.
const apiRoot = "/api/v3/"

// PullRequest is a pull request as the stand-in keeps it.
type PullRequest struct {
	Number             int
	Title, Body        string
	Head, Base         string
	State              string
	Merged             bool
	Labels             []string
	RequestedReviewers []string
	// CreatedAt is when it was opened (GitHub's created_at).
	CreatedAt time.Time
}

// failure is an injected answer to the next call.
type failure struct {
	status  int
	headers map[string]string
	message string
}

// StartRepository starts the API for owner/name, accepting token, and
// stops it when the test ends.
func StartRepository(t testing.TB, owner, name, token string) *Repository {
	t.Helper()
	r := &Repository{Owner: owner, Name: name, token: token}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + apiRoot
	return r
}

// ServeReleases makes the API also answer GET
// /api/v3/repos/{owner}/{repo}/releases, of any repository, as rel does:
// the releases of sources on the same host as the pull requests.
func (r *Repository) ServeReleases(rel *Releases) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releases = rel
}

// Fail makes the next n calls answer status with GitHub's error body.
func (r *Repository) Fail(n, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for range n {
		r.fails = append(r.fails, failure{status: status, message: http.StatusText(status)})
	}
}

// RateLimit makes the next call answer as GitHub's exhausted primary rate
// limit does, resetting after reset.
func (r *Repository) RateLimit(reset time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails = append(r.fails, failure{status: http.StatusForbidden, message: "API rate limit exceeded for installation ID 77.",
		headers: map[string]string{
			"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Used": "5000",
			"X-RateLimit-Reset": strconv.FormatInt(time.Now().Add(reset).Unix(), 10), "X-RateLimit-Resource": "core",
		}})
}

// Close closes pull request number, as a person would on the web page.
func (r *Repository) Close(number int) { r.setState(number, "closed", false) }

// Merge merges pull request number.
func (r *Repository) Merge(number int) { r.setState(number, "closed", true) }

func (r *Repository) setState(number int, state string, merged bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pulls {
		if p.Number == number {
			p.State, p.Merged = state, merged
		}
	}
}

// PullRequests returns a copy of every pull request, by number.
func (r *Repository) PullRequests() []PullRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]PullRequest, 0, len(r.pulls))
	for _, p := range r.pulls {
		c := *p
		c.Labels = slices.Clone(p.Labels)
		c.RequestedReviewers = slices.Clone(p.RequestedReviewers)
		out = append(out, c)
	}
	return out
}

// Calls returns "METHOD path" of every call made, failed ones included.
func (r *Repository) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *Repository) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, req.Method+" "+req.URL.Path)
	if len(r.fails) > 0 {
		f := r.fails[0]
		r.fails = r.fails[1:]
		for k, v := range f.headers {
			w.Header().Set(k, v)
		}
		writeError(w, f.status, f.message)
		return
	}
	if r.releases != nil && strings.HasSuffix(req.URL.Path, "/releases") {
		r.releases.serve(w, req)
		return
	}
	auth := req.Header.Get("Authorization")
	if auth != "Bearer "+r.token && auth != "token "+r.token {
		writeError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	prefix := fmt.Sprintf("%srepos/%s/%s/", apiRoot, r.Owner, r.Name)
	rest, ok := strings.CutPrefix(req.URL.Path, prefix)
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1 && parts[0] == "pulls" && req.Method == http.MethodGet:
		r.list(w, req)
	case len(parts) == 1 && parts[0] == "pulls" && req.Method == http.MethodPost:
		r.create(w, req)
	case len(parts) == 2 && parts[0] == "pulls" && req.Method == http.MethodPatch:
		r.withPull(w, parts[1], func(p *PullRequest) { r.edit(w, req, p) })
	case len(parts) == 3 && parts[0] == "issues" && parts[2] == "labels" && req.Method == http.MethodPost:
		r.withPull(w, parts[1], func(p *PullRequest) { r.addLabels(w, req, p) })
	case len(parts) == 3 && parts[0] == "pulls" && parts[2] == "requested_reviewers" && req.Method == http.MethodPost:
		r.withPull(w, parts[1], func(p *PullRequest) { r.requestReviewers(w, req, p) })
	default:
		writeError(w, http.StatusNotFound, "Not Found")
	}
}

func (r *Repository) list(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	head := q.Get("head")
	if head != "" && !strings.Contains(head, ":") {
		writeError(w, http.StatusUnprocessableEntity, "head must be user:ref-name")
		return
	}
	out := []map[string]any{}
	for _, p := range r.pulls {
		if (state != "all" && p.State != state) || (head != "" && head != r.Owner+":"+p.Head) || (q.Get("base") != "" && q.Get("base") != p.Base) {
			continue
		}
		out = append(out, r.json(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (r *Repository) create(w http.ResponseWriter, req *http.Request) {
	var in struct{ Title, Body, Head, Base string }
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil || in.Title == "" || in.Head == "" || in.Base == "" {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	for _, p := range r.pulls {
		if p.State == "open" && p.Head == in.Head && p.Base == in.Base {
			writeError(w, http.StatusUnprocessableEntity, "A pull request already exists for "+r.Owner+":"+in.Head+".")
			return
		}
	}
	p := &PullRequest{Number: len(r.pulls) + 1, Title: in.Title, Body: in.Body, Head: in.Head, Base: in.Base, State: "open", CreatedAt: time.Now()}
	r.pulls = append(r.pulls, p)
	writeJSON(w, http.StatusCreated, r.json(p))
}

func (r *Repository) edit(w http.ResponseWriter, req *http.Request, p *PullRequest) {
	var in struct {
		Title, Body *string
		State       *string
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if in.State != nil && *in.State == "open" && p.Merged {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed: state cannot be changed. The pull request was merged")
		return
	}
	if in.Title != nil {
		p.Title = *in.Title
	}
	if in.Body != nil {
		p.Body = *in.Body
	}
	if in.State != nil {
		p.State = *in.State
	}
	writeJSON(w, http.StatusOK, r.json(p))
}

func (r *Repository) addLabels(w http.ResponseWriter, req *http.Request, p *PullRequest) {
	// The body is a JSON array of names, or {"labels": [...]}.
	var labels []string
	var wrapped struct{ Labels []string }
	var raw json.RawMessage
	if err := json.NewDecoder(req.Body).Decode(&raw); err != nil || (json.Unmarshal(raw, &labels) != nil && json.Unmarshal(raw, &wrapped) != nil) {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	if labels == nil {
		labels = wrapped.Labels
	}
	for _, l := range labels {
		if !slices.Contains(p.Labels, l) {
			p.Labels = append(p.Labels, l)
		}
	}
	out := []map[string]any{}
	for _, l := range p.Labels {
		out = append(out, map[string]any{"name": l})
	}
	writeJSON(w, http.StatusOK, out)
}

func (r *Repository) requestReviewers(w http.ResponseWriter, req *http.Request, p *PullRequest) {
	var in struct {
		Reviewers []string `json:"reviewers"`
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	for _, u := range in.Reviewers {
		if !slices.Contains(p.RequestedReviewers, u) {
			p.RequestedReviewers = append(p.RequestedReviewers, u)
		}
	}
	writeJSON(w, http.StatusCreated, r.json(p))
}

// withPull runs fn on the pull request numbered by the path segment.
func (r *Repository) withPull(w http.ResponseWriter, segment string, fn func(*PullRequest)) {
	n, err := strconv.Atoi(segment)
	if err == nil {
		for _, p := range r.pulls {
			if p.Number == n {
				fn(p)
				return
			}
		}
	}
	writeError(w, http.StatusNotFound, "Not Found")
}

// json is p as GitHub's API returns a pull request, in part.
func (r *Repository) json(p *PullRequest) map[string]any {
	labels := []map[string]any{}
	for _, l := range p.Labels {
		labels = append(labels, map[string]any{"name": l})
	}
	reviewers := []map[string]any{}
	for _, u := range p.RequestedReviewers {
		reviewers = append(reviewers, map[string]any{"login": u})
	}
	return map[string]any{
		"number":              p.Number,
		"state":               p.State,
		"merged":              p.Merged,
		"title":               p.Title,
		"body":                p.Body,
		"html_url":            fmt.Sprintf("https://github.com/%s/%s/pull/%d", r.Owner, r.Name, p.Number),
		"head":                map[string]any{"ref": p.Head, "label": r.Owner + ":" + p.Head},
		"base":                map[string]any{"ref": p.Base, "label": r.Owner + ":" + p.Base},
		"labels":              labels,
		"requested_reviewers": reviewers,
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]string{"message": message, "documentation_url": "https://docs.github.com/rest"})
}
