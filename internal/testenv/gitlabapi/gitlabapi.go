// Package gitlabapi is a stand-in for the merge request endpoints of
// GitLab's REST API (v4) for one project, following GitLab's documented
// contract:
//
//	GET  /api/v4/projects/:id/merge_requests?state=opened&source_branch=&target_branch=
//	POST /api/v4/projects/:id/merge_requests            201, 409 when one is open
//	PUT  /api/v4/projects/:id/merge_requests/:iid
//	GET  /api/v4/users?username=
//
// where :id is the project's URL-encoded full path. Every call needs the
// PRIVATE-TOKEN header (or Authorization: Bearer); errors are GitLab's
// JSON ({"message"}), and RateLimit answers 429 with Retry-After and
// RateLimit-Reset as GitLab.com does.
package gitlabapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Project is the stand-in API of one project.
type Project struct {
	// URL is the instance's base URL, for pullRequest.url.
	URL string
	// Path is the project's full path, such as group/fleet.
	Path string

	token string
	mu    sync.Mutex
	mrs   []*MergeRequest
	users map[string]int64
	fails []failure
	calls []string
}

// MergeRequest is a merge request as the stand-in keeps it.
type MergeRequest struct {
	IID                        int64
	Title, Description         string
	SourceBranch, TargetBranch string
	// State is opened, closed or merged.
	State       string
	Labels      []string
	ReviewerIDs []int64
}

type failure struct {
	status  int
	headers map[string]string
}

// Start starts the API for the project path, accepting token, with the
// users given (name to ID), and stops it when the test ends.
func Start(t testing.TB, path, token string, users map[string]int64) *Project {
	t.Helper()
	p := &Project{Path: path, token: token, users: users}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Fail makes the next n calls answer status.
func (p *Project) Fail(n, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range n {
		p.fails = append(p.fails, failure{status: status})
	}
}

// RateLimit makes the next call answer 429 with Retry-After.
func (p *Project) RateLimit(retryAfter time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	secs := int64(retryAfter / time.Second)
	p.fails = append(p.fails, failure{status: http.StatusTooManyRequests, headers: map[string]string{
		"Retry-After": strconv.FormatInt(secs, 10), "RateLimit-Limit": "600", "RateLimit-Remaining": "0",
		"RateLimit-Reset": strconv.FormatInt(time.Now().Add(retryAfter).Unix(), 10),
	}})
}

// Close closes merge request iid; Merge merges it.
func (p *Project) Close(iid int64) { p.setState(iid, "closed") }

// Merge merges merge request iid.
func (p *Project) Merge(iid int64) { p.setState(iid, "merged") }

func (p *Project) setState(iid int64, state string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, mr := range p.mrs {
		if mr.IID == iid {
			mr.State = state
		}
	}
}

// MergeRequests returns a copy of every merge request, by IID.
func (p *Project) MergeRequests() []MergeRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]MergeRequest, 0, len(p.mrs))
	for _, mr := range p.mrs {
		c := *mr
		c.Labels = slices.Clone(mr.Labels)
		c.ReviewerIDs = slices.Clone(mr.ReviewerIDs)
		out = append(out, c)
	}
	return out
}

// Calls returns "METHOD path" of every call made.
func (p *Project) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

func (p *Project) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	path := r.URL.EscapedPath()
	p.calls = append(p.calls, r.Method+" "+path)
	if len(p.fails) > 0 {
		f := p.fails[0]
		p.fails = p.fails[1:]
		for k, v := range f.headers {
			w.Header().Set(k, v)
		}
		writeError(w, f.status, http.StatusText(f.status))
		return
	}
	if r.Header.Get("PRIVATE-TOKEN") != p.token && r.Header.Get("Authorization") != "Bearer "+p.token {
		writeError(w, http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	if path == "/api/v4/users" && r.Method == http.MethodGet {
		p.listUsers(w, r)
		return
	}
	rest, ok := strings.CutPrefix(path, "/api/v4/projects/"+url.PathEscape(p.Path)+"/merge_requests")
	if !ok {
		writeError(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	switch {
	case rest == "" && r.Method == http.MethodGet:
		p.list(w, r)
	case rest == "" && r.Method == http.MethodPost:
		p.create(w, r)
	case strings.HasPrefix(rest, "/") && r.Method == http.MethodPut:
		iid, _ := strconv.ParseInt(rest[1:], 10, 64)
		for _, mr := range p.mrs {
			if mr.IID == iid {
				p.update(w, r, mr)
				return
			}
		}
		writeError(w, http.StatusNotFound, "404 Not found")
	default:
		writeError(w, http.StatusNotFound, "404 Not found")
	}
}

func (p *Project) listUsers(w http.ResponseWriter, r *http.Request) {
	out := []map[string]any{}
	name := r.URL.Query().Get("username")
	if id, ok := p.users[name]; ok {
		out = append(out, map[string]any{"id": id, "username": name})
	}
	writeJSON(w, http.StatusOK, out)
}

func (p *Project) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	out := []map[string]any{}
	for _, mr := range p.mrs {
		if s := q.Get("state"); s != "" && s != "all" && s != mr.State {
			continue
		}
		if s := q.Get("source_branch"); s != "" && s != mr.SourceBranch {
			continue
		}
		if s := q.Get("target_branch"); s != "" && s != mr.TargetBranch {
			continue
		}
		out = append(out, p.json(mr))
	}
	writeJSON(w, http.StatusOK, out)
}

// mrOptions are the fields of a create or update call.
type mrOptions struct {
	Title        *string  `json:"title"`
	Description  *string  `json:"description"`
	SourceBranch string   `json:"source_branch"`
	TargetBranch string   `json:"target_branch"`
	Labels       *string  `json:"labels"`
	AddLabels    *string  `json:"add_labels"`
	ReviewerIDs  *[]int64 `json:"reviewer_ids"`
	StateEvent   string   `json:"state_event"`
}

func (p *Project) create(w http.ResponseWriter, r *http.Request) {
	var in mrOptions
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Title == nil || in.SourceBranch == "" || in.TargetBranch == "" {
		writeError(w, http.StatusBadRequest, "400 Bad request - title, source_branch and target_branch are required")
		return
	}
	for _, mr := range p.mrs {
		if mr.State == "opened" && mr.SourceBranch == in.SourceBranch && mr.TargetBranch == in.TargetBranch {
			writeError(w, http.StatusConflict, fmt.Sprintf("Another open merge request already exists for this source branch: !%d", mr.IID))
			return
		}
	}
	mr := &MergeRequest{IID: int64(len(p.mrs) + 1), Title: *in.Title, SourceBranch: in.SourceBranch, TargetBranch: in.TargetBranch, State: "opened"}
	p.apply(mr, in)
	p.mrs = append(p.mrs, mr)
	writeJSON(w, http.StatusCreated, p.json(mr))
}

func (p *Project) update(w http.ResponseWriter, r *http.Request, mr *MergeRequest) {
	var in mrOptions
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "400 Bad request")
		return
	}
	if in.StateEvent == "reopen" && mr.State == "merged" {
		writeError(w, http.StatusUnprocessableEntity, "a merged merge request cannot be reopened")
		return
	}
	p.apply(mr, in)
	switch in.StateEvent {
	case "reopen":
		mr.State = "opened"
	case "close":
		mr.State = "closed"
	}
	writeJSON(w, http.StatusOK, p.json(mr))
}

// apply sets the fields in sent; labels and add_labels are comma-separated.
func (p *Project) apply(mr *MergeRequest, in mrOptions) {
	if in.Title != nil {
		mr.Title = *in.Title
	}
	if in.Description != nil {
		mr.Description = *in.Description
	}
	if in.Labels != nil {
		mr.Labels = splitLabels(*in.Labels)
	}
	if in.AddLabels != nil {
		for _, l := range splitLabels(*in.AddLabels) {
			if !slices.Contains(mr.Labels, l) {
				mr.Labels = append(mr.Labels, l)
			}
		}
	}
	if in.ReviewerIDs != nil {
		mr.ReviewerIDs = slices.Clone(*in.ReviewerIDs)
	}
}

func splitLabels(s string) []string {
	var out []string
	for _, l := range strings.Split(s, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// json is mr as GitLab's API returns a merge request, in part.
func (p *Project) json(mr *MergeRequest) map[string]any {
	reviewers := []map[string]any{}
	for _, id := range mr.ReviewerIDs {
		reviewers = append(reviewers, map[string]any{"id": id})
	}
	return map[string]any{
		"id":            1000 + mr.IID,
		"iid":           mr.IID,
		"title":         mr.Title,
		"description":   mr.Description,
		"state":         mr.State,
		"source_branch": mr.SourceBranch,
		"target_branch": mr.TargetBranch,
		"labels":        append([]string{}, mr.Labels...),
		"reviewers":     reviewers,
		"web_url":       fmt.Sprintf("%s/%s/-/merge_requests/%d", p.URL, p.Path, mr.IID),
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]string{"message": message})
}
