package notes

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	giteasdk "code.gitea.io/sdk/gitea"

	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/testenv/gitea"
)

// tagsOf lists releases as tag=body.
func tagsOf(releases []Release) string {
	var out []string
	for _, r := range releases {
		out = append(out, r.Tag+"="+strings.TrimSpace(r.Body))
	}
	return strings.Join(out, " ")
}

// TestGiteaReleasesAndChangelog, on a real Gitea: the releases between the
// two versions, newest first, drafts left out, read with the token; a
// repository without releases gives the sections of its CHANGELOG.md that
// are between the two versions instead; one without either says so.
func TestGiteaReleasesAndChangelog(t *testing.T) {
	srv := gitea.Start(t)
	c := srv.Client(t)
	srv.CreateRepo(t, "agent", "main", nil)
	for _, r := range []struct {
		tag   string
		draft bool
	}{{"v1.0.0", false}, {"v1.1.0", false}, {"v1.2.0", false}, {"v1.2.5", true}, {"v1.3.0", false}, {"v1.4.0", false}} {
		if _, _, err := c.CreateRelease(srv.Admin, "agent", giteasdk.CreateReleaseOption{TagName: r.tag, Target: "main", Title: "Agent " + r.tag, Note: "notes of " + r.tag, IsDraft: r.draft}); err != nil {
			t.Fatal(err)
		}
	}
	srv.CreateRepo(t, "lib", "main", map[string]string{"CHANGELOG.md": "# Changelog\n\n## [Unreleased]\n\n- soon\n\n" +
		"## [1.2.0] - 2026-11-20\n\n### Fixed\n\n- a leak\n\n## [1.1.0] - 2026-11-10\n\n- a feature\n\n## [1.0.0] - 2026-11-01\n\n- first\n"})
	srv.CreateRepo(t, "bare", "main", nil)
	api := API{Kind: Gitea, URL: srv.URL, Token: srv.Token}
	web := strings.TrimSuffix(srv.URL, "/") + "/" + srv.Admin
	f := NewFetcher(outbound.Denylist{}.Client(time.Minute), nil)
	ctx := context.Background()

	got, err := f.Releases(ctx, api, web+"/agent", "1.0.0", "1.3.0")
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1.3.0=notes of v1.3.0 v1.2.0=notes of v1.2.0 v1.1.0=notes of v1.1.0"; tagsOf(got) != want {
		t.Errorf("releases %q, want %q", tagsOf(got), want)
	}
	if got[0].Name != "Agent v1.3.0" || got[0].URL != web+"/agent/releases/tag/v1.3.0" {
		t.Errorf("release %+v: want its title and web page", got[0])
	}
	if f.Pages() != 1 {
		t.Errorf("%d requests, want 1", f.Pages())
	}

	got, err = f.Releases(ctx, api, web+"/lib", "1.0.0", "1.2.0")
	if err != nil {
		t.Fatal(err)
	}
	if want := "1.2.0=### Fixed\n\n- a leak 1.1.0=- a feature"; tagsOf(got) != want {
		t.Errorf("changelog sections %q, want %q", tagsOf(got), want)
	}
	if got[0].Name != "[1.2.0] - 2026-11-20" || got[0].URL != web+"/lib" {
		t.Errorf("section %+v: want its heading and the repository", got[0])
	}

	if _, err := f.Releases(ctx, api, web+"/bare", "1.0.0", "1.2.0"); err == nil || !strings.Contains(err.Error(), "no release between the two versions, and no CHANGELOG.md") {
		t.Errorf("neither releases nor changelog: %v", err)
	}
}

// TestGitLabReleases, against a stand-in for GitLab's releases API
// (GET /projects/:id/releases, newest first, page and per_page, the next
// page in X-Next-Page, the token in PRIVATE-TOKEN): the releases between
// the two versions of a project in a subgroup, over two pages, upcoming
// releases left out, each linked to its page.
func TestGitLabReleases(t *testing.T) {
	type release struct {
		TagName         string `json:"tag_name"`
		Name            string `json:"name"`
		Description     string `json:"description"`
		UpcomingRelease bool   `json:"upcoming_release"`
	}
	all := []release{{"v1.4.0", "", "upcoming", true}, {"v1.3.0", "1.3", "notes of v1.3.0", false}, {"v1.2.0", "", "notes of v1.2.0", false},
		{"v1.1.0", "", "notes of v1.1.0", false}, {"v1.0.0", "", "old", false}}
	var requests int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		if r.URL.EscapedPath() != "/api/v4/projects/acme%2Fagents%2Fagent/releases" || r.Header.Get("PRIVATE-TOKEN") != "glpat" {
			http.Error(w, `{"message":"404 Not Found"}`, http.StatusNotFound)
			return
		}
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		page = max(page, 1)
		const per = 2 // smaller pages than asked, as a server may give
		from, to := min((page-1)*per, len(all)), min(page*per, len(all))
		if to < len(all) {
			w.Header().Set("X-Next-Page", strconv.Itoa(page+1))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(all[from:to])
	}))
	t.Cleanup(srv.Close)
	f := NewFetcher(outbound.Denylist{}.Client(10*time.Second), nil)
	source := "https://gitlab.example/acme/agents/agent"
	got, err := f.Releases(context.Background(), API{Kind: GitLab, URL: srv.URL, Token: "glpat"}, source, "1.0.0", "1.4.0")
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1.3.0=notes of v1.3.0 v1.2.0=notes of v1.2.0 v1.1.0=notes of v1.1.0"; tagsOf(got) != want {
		t.Errorf("releases %q, want %q", tagsOf(got), want)
	}
	if got[0].URL != source+"/-/releases/v1.3.0" || got[0].Name != "1.3" {
		t.Errorf("release %+v: want its name and page", got[0])
	}
	if requests != 3 {
		t.Errorf("%d requests, want 3 (the old version is on the third page)", requests)
	}
}

// TestCompareTagsURL: a compare link of two tags is made only of a
// repository address and two plain tag names.
func TestCompareTagsURL(t *testing.T) {
	for _, tc := range []struct{ source, old, new, want string }{
		{"https://git.example/acme/cli", "v1.9.0", "v2.1.0", "https://git.example/acme/cli/compare/v1.9.0...v2.1.0"},
		{"https://git.example/acme/cli", "v1.9.0", "v2.1.0)[ok](https://evil.example", ""},
		{"https://git.example/acme/cli", "v1.9.0", "v1.9.0", ""},
		{"https://git.example/acme/cli", "", "v2.1.0", ""},
		{"javascript:alert(1)//x/y", "a", "b", ""},
	} {
		if got := CompareTagsURL(tc.source, tc.old, tc.new); got != tc.want {
			t.Errorf("CompareTagsURL(%q, %q, %q) = %q, want %q", tc.source, tc.old, tc.new, got, tc.want)
		}
	}
}
