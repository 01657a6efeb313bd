package sourcekind_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/source"
	"github.com/uprev-dev/uprev/internal/sourcekind"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
)

// notesOf returns what kind spec's Notes finds for old --> new with
// readers r and access.
func notesOf(t *testing.T, spec uprevv1.ReleaseSourceSpec, r sourcekind.NotesReaders, access source.Access, old, new string) notes.Change {
	t.Helper()
	kind, err := sourcekind.Of(spec)
	if err != nil {
		t.Fatal(err)
	}
	c := notes.Change{Title: "source: " + old + " --> " + new}
	kind.Notes(context.Background(), &c, r, "ns/source", access, old, new)
	return c
}

// readers are NotesReaders through the outbound layer, with GitHub's
// releases of chart sources at gh.
func readers(gh string) sourcekind.NotesReaders {
	return sourcekind.NotesReaders{
		Fetcher: notes.NewFetcher(outbound.Denylist{}.Client(5*time.Second), nil),
		Sources: source.NewClient(source.Options{}),
		APIFor:  func(string) notes.API { return notes.API{URL: gh} },
	}
}

// TestGitHubReleasesNotesSendTheTokenToTheSourcesHostOnly: the releases of
// a private repository (a stand-in that answers an anonymous request 404
// and another token 401, as GitHub does) are read with the token of the
// source's Secret; when the source's API redirects (as GitHub does for a
// moved repository) to another host, that host never sees the token, not
// even a host the release notes name.
func TestGitHubReleasesNotesSendTheTokenToTheSourcesHostOnly(t *testing.T) {
	g := NewWithT(t)
	const token = "ghp_private-releases"
	access := source.Access{Secret: map[string][]byte{"bearerToken": []byte(token)}}
	api := githubapi.StartReleases(t)
	api.RequireToken(token)
	other := githubapi.StartReleases(t)
	releases := []githubapi.Release{
		{TagName: "v2.0.0", Body: "Moved: see " + other.URL + "/repos/acme/moved/releases"},
		{TagName: "v1.0.0"},
	}
	api.SetReleases("acme/private", releases...)
	other.SetReleases("acme/moved", releases...)

	spec := uprevv1.ReleaseSourceSpec{GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "acme/private", URL: api.URL}}
	c := notesOf(t, spec, readers(""), access, "v1.0.0", "v2.0.0")
	g.Expect(c.Missing).To(BeEmpty())
	g.Expect(c.Releases).To(HaveExactElements(HaveField("Tag", "v2.0.0")))
	g.Expect(c.Source).To(Equal(api.URL + "/acme/private"))

	anonymous := notesOf(t, spec, readers(""), source.Access{}, "v1.0.0", "v2.0.0")
	g.Expect(anonymous.Releases).To(BeEmpty())
	g.Expect(anonymous.Missing).To(ContainSubstring("404 Not Found"))

	// The source's API moved the repository to another host.
	var seen atomic.Value
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("Authorization"))
		http.Redirect(w, r, other.URL+strings.Replace(r.URL.RequestURI(), "acme/private", "acme/moved", 1), http.StatusMovedPermanently)
	}))
	t.Cleanup(moved.Close)
	spec.GitHubReleases.URL = moved.URL
	c = notesOf(t, spec, readers(""), access, "v1.0.0", "v2.0.0")
	g.Expect(c.Missing).To(BeEmpty())
	g.Expect(c.Releases).To(HaveLen(1))
	g.Expect(seen.Load()).To(Equal("Bearer " + token))
	g.Expect(other.Requests()).NotTo(BeEmpty())
	for _, r := range other.Requests() {
		g.Expect(r.Header.Get("Authorization")).To(BeEmpty(), "the token went to %s", r.Host)
	}
}

// chartIndex is a repository index with two versions of agent, the new one
// with Artifact Hub's changes, a home and two sources.
const chartIndex = `apiVersion: v1
entries:
  agent:
  - apiVersion: v2
    name: agent
    version: 2.1.0
    home: https://agent.example
    sources:
    - https://github.com/acme/charts
    - https://git.example/acme/agent
    annotations:
      artifacthub.io/changes: |
        - kind: added
          description: A PodDisruptionBudget, thanks @someone
    urls: [agent-2.1.0.tgz]
  - apiVersion: v2
    name: agent
    version: 2.0.0
    urls: [agent-2.0.0.tgz]
  other:
  - apiVersion: v2
    name: other
    version: 9.9.9
    home: https://other.example
    urls: [other-9.9.9.tgz]
`

// TestHelmRepositoryNotes: the update of a chart of a classic repository
// has what the index's entry of the new version says: Artifact Hub's
// changes first, then the releases of its first source between the two
// versions, its home and all its sources; the index is read with the
// source's credentials, once for any number of pull requests of that
// version.
func TestHelmRepositoryNotes(t *testing.T) {
	g := NewWithT(t)
	var requests atomic.Int32
	repo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "charts" || pass != "s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		requests.Add(1)
		_, _ = w.Write([]byte(chartIndex))
	}))
	t.Cleanup(repo.Close)
	gh := githubapi.StartReleases(t)
	gh.SetReleases("acme/charts", githubapi.Release{TagName: "2.1.0", Body: "chart 2.1.0"}, githubapi.Release{TagName: "2.0.0"})
	access := source.Access{Secret: map[string][]byte{"username": []byte("charts"), "password": []byte("s3cret")}}
	spec := uprevv1.ReleaseSourceSpec{HelmRepository: &uprevv1.HelmRepositorySource{URL: repo.URL, Chart: "agent"}}
	r := readers(gh.URL)

	for range 2 {
		c := notesOf(t, spec, r, access, "2.0.0", "2.1.0")
		g.Expect(c.Missing).To(BeEmpty())
		g.Expect(c.Home).To(Equal("https://agent.example"))
		g.Expect(c.Source).To(Equal("https://github.com/acme/charts"))
		g.Expect(c.MoreSources).To(Equal([]string{"https://git.example/acme/agent"}))
		g.Expect(c.Releases).To(HaveExactElements(
			HaveField("Body", "- added: A PodDisruptionBudget, thanks @someone\n"),
			HaveField("Body", "chart 2.1.0")))
		g.Expect(notes.Render([]notes.Change{c}, notes.MaxBodyChars)).To(Equal(`**source: 2.0.0 --> 2.1.0**

- Home: https://agent.example
- Source: https://github.com/acme/charts
- Source: https://git.example/acme/agent

<details><summary>Release notes: 2 releases</summary>

**2.1.0 (artifacthub.io/changes) (2.1.0)**

> - added: A PodDisruptionBudget, thanks @` + "\u200b" + `someone

**2.1.0**

> chart 2.1.0

</details>

`))
	}
	g.Expect(requests.Load()).To(Equal(int32(1)))

	c := notesOf(t, spec, r, source.Access{}, "2.0.0", "2.1.0")
	g.Expect(c.Missing).To(ContainSubstring("HTTP 401"))
	c = notesOf(t, spec, r, access, "2.0.0", "3.0.0")
	g.Expect(c.Missing).To(ContainSubstring(`version "3.0.0" of chart "agent" is not in the repository's index`))
}

// feed is a JSON release feed with notes per version.
const feed = `{"releases": [
  {"version": "1.2.0", "notes": "Fixes </details> for @someone\nUprev-Update: x 1 --> 6"},
  {"version": "1.1.0", "notes": ["First line", "Second line"]},
  {"version": "1.0.0"}
]}`

// TestHTTPJSONNotes: an httpJSON source's notes expression, a template of
// the version, names the new version's notes in its document (a string,
// or lines), read with the source's token once per version and rendered
// inert; a version that cannot be quoted in the expression, a version
// without notes and a source without the field give none, saying why.
func TestHTTPJSONNotes(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	var auth []string
	doc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte(feed))
	}))
	t.Cleanup(doc.Close)
	access := source.Access{Secret: map[string][]byte{"bearerToken": []byte("feed-token")}}
	spec := uprevv1.ReleaseSourceSpec{HTTPJSON: &uprevv1.HTTPJSONSource{URL: doc.URL + "/feed.json",
		Versions: "{.releases[*].version}", Notes: `{.releases[?(@.version=="{{.Version}}")].notes}`}}
	r := readers("")

	c := notesOf(t, spec, r, access, "1.1.0", "1.2.0")
	g.Expect(c.Missing).To(BeEmpty())
	g.Expect(c.Releases).To(HaveExactElements(notes.Release{Tag: "1.2.0", URL: doc.URL + "/feed.json",
		Body: "Fixes </details> for @someone\nUprev-Update: x 1 --> 6"}))
	rendered := notes.Render([]notes.Change{c}, notes.MaxBodyChars)
	g.Expect(rendered).To(ContainSubstring("> Fixes &lt;/details> for @\u200bsomeone\n> Uprev-Update: x 1 --> 6\n"))
	notesOf(t, spec, r, access, "1.1.0", "1.2.0")
	c = notesOf(t, spec, r, access, "1.0.0", "1.1.0")
	g.Expect(c.Releases).To(HaveExactElements(HaveField("Body", "First line\nSecond line")))
	g.Expect(auth).To(Equal([]string{"Bearer feed-token", "Bearer feed-token"}))

	c = notesOf(t, spec, r, access, "0.9.0", "1.0.0")
	g.Expect(c.Missing).To(Equal("the document has no notes for 1.0.0"))
	c = notesOf(t, spec, r, access, "1.0.0", `1.3.0")].x`)
	g.Expect(c.Missing).To(ContainSubstring("has characters a JSONPath expression does not quote"))
	spec.HTTPJSON.Notes = ""
	c = notesOf(t, spec, r, access, "1.1.0", "1.2.0")
	g.Expect(c.Missing).To(Equal("the source names no notes in its document (spec.httpJSON.notes)"))

	spec.HTTPJSON.Notes = "{..notes}"
	kind, err := sourcekind.Of(spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kind.Check()).To(MatchError(ContainSubstring("spec.httpJSON.notes: ")))
}
