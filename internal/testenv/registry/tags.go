package registry

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// tagListRepo returns the repository of a GET /v2/<name>/tags/list request.
func tagListRepo(req *http.Request) (string, bool) {
	if req.Method != http.MethodGet {
		return "", false
	}
	rest, ok := strings.CutPrefix(req.URL.Path, "/v2/")
	if !ok {
		return "", false
	}
	repo, ok := strings.CutSuffix(rest, "/tags/list")
	return repo, ok && repo != ""
}

// serveTags serves one page of a tag list. go-containerregistry's registry
// understands n and last but sends no Link header (and returns every tag
// when last is past the end), so paging is done here, on its full list.
func (r *Registry) serveTags(w http.ResponseWriter, req *http.Request, repo string) {
	tags, ok := r.allTags(req, repo)
	if !ok {
		writeError(w, http.StatusNotFound, "NAME_UNKNOWN", "Unknown name")
		return
	}
	q := req.URL.Query()
	if last := q.Get("last"); last != "" {
		tags = tags[sort.SearchStrings(tags, last):]
		if len(tags) > 0 && tags[0] == last {
			tags = tags[1:]
		}
	}
	n := r.opts.pageSize
	if s := q.Get("n"); s != "" {
		asked, err := strconv.Atoi(s)
		if err != nil || asked < 0 {
			writeError(w, http.StatusBadRequest, "PAGINATION_NUMBER_INVALID", "invalid n")
			return
		}
		if n == 0 || asked < n {
			n = asked
		}
	}
	if n > 0 && len(tags) > n {
		tags = tags[:n]
		next := url.Values{"n": {strconv.Itoa(n)}, "last": {tags[n-1]}}
		w.Header().Set("Link", fmt.Sprintf(`</v2/%s/tags/list?%s>; rel="next"`, repo, next.Encode()))
	}
	body, err := json.Marshal(struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}{Name: repo, Tags: tags})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// allTags returns the sorted tags of repo, asking the underlying registry
// for its full list when the cache does not have it.
func (r *Registry) allTags(req *http.Request, repo string) ([]string, bool) {
	r.mu.Lock()
	tags, ok := r.sortedTags[repo]
	r.mu.Unlock()
	if ok {
		return tags, true
	}
	full := httptest.NewRequestWithContext(req.Context(), http.MethodGet, "/v2/"+repo+"/tags/list", nil)
	rec := httptest.NewRecorder()
	r.store.ServeHTTP(rec, full)
	if rec.Code != http.StatusOK {
		return nil, false
	}
	var list struct {
		Tags []string `json:"tags"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		return nil, false
	}
	r.mu.Lock()
	r.sortedTags[repo] = list.Tags
	r.mu.Unlock()
	return list.Tags, true
}

func (r *Registry) forgetTags() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.sortedTags)
}
