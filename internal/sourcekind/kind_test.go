package sourcekind_test

import (
	"errors"
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/source"
	"github.com/uprev-dev/uprev/internal/sourcekind"
)

// password is the credential every URL below carries; no text meant for
// people may show it.
const password = "s3cret-passw0rd"

// TestKinds pins, for each kind, what it names and how it is reached: its
// server's URL, its descriptions with credentials redacted, what it
// refuses, how a GitHub App authenticates it, and which notifications
// concern it.
func TestKinds(t *testing.T) {
	tagsPushedTo := func(keys ...string) func(string) bool {
		return func(repoURL string) bool { return slices.Contains(keys, gitrepo.RepoKey(repoURL)) }
	}
	for _, tc := range []struct {
		name     string
		spec     uprevv1.ReleaseSourceSpec
		short    string
		url      string
		describe string
		from     string
		check    string // a substring of Check's error; "" for none
		appURL   string
		bearer   bool
		app      bool
		notified []sourcekind.Notification
		ignored  []sourcekind.Notification
	}{
		{
			name:     "helmRepository",
			spec:     uprevv1.ReleaseSourceSpec{HelmRepository: &uprevv1.HelmRepositorySource{URL: "https://bot:" + password + "@charts.example.com/stable", Chart: "podinfo"}},
			short:    "helm",
			url:      "https://bot:" + password + "@charts.example.com/stable",
			describe: "chart podinfo of https://bot:xxxxx@charts.example.com/stable",
			from:     "podinfo in https://bot:xxxxx@charts.example.com/stable",
			ignored: []sourcekind.Notification{
				{TagsPushed: func(string) bool { return true }},
				{Released: "stable/podinfo"},
			},
		},
		{
			name:     "githubReleases at GitHub",
			spec:     uprevv1.ReleaseSourceSpec{GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "kubernetes/kubernetes"}},
			short:    "github",
			url:      forge.DefaultGitHubURL,
			describe: "releases of kubernetes/kubernetes at " + forge.DefaultGitHubURL,
			from:     "kubernetes/kubernetes",
			appURL:   forge.DefaultGitHubURL,
			bearer:   true,
			app:      true,
			notified: []sourcekind.Notification{{Released: "kubernetes/kubernetes"}, {Released: "Kubernetes/Kubernetes"}},
			ignored: []sourcekind.Notification{
				{},
				{Released: "kubernetes/kubectl"},
				{TagsPushed: func(string) bool { return true }},
			},
		},
		{
			name:     "githubReleases at a server of its own",
			spec:     uprevv1.ReleaseSourceSpec{GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "acme/tool", URL: "https://bot:" + password + "@git.example.com/api/v3"}},
			short:    "github",
			url:      "https://bot:" + password + "@git.example.com/api/v3",
			describe: "releases of acme/tool at https://bot:xxxxx@git.example.com/api/v3",
			from:     "acme/tool at https://bot:xxxxx@git.example.com/api/v3",
			appURL:   "https://bot:" + password + "@git.example.com/api/v3",
			bearer:   true,
			app:      true,
			notified: []sourcekind.Notification{{Released: "acme/tool"}},
		},
		{
			name:     "gitTags",
			spec:     uprevv1.ReleaseSourceSpec{GitTags: &uprevv1.GitTagsSource{URL: "https://bot:" + password + "@git.example.com/acme/tool.git"}},
			short:    "git",
			url:      "https://bot:" + password + "@git.example.com/acme/tool.git",
			describe: "tags of https://bot:xxxxx@git.example.com/acme/tool.git",
			from:     "https://bot:xxxxx@git.example.com/acme/tool.git",
			appURL:   "https://bot:" + password + "@git.example.com/acme/tool.git",
			app:      true,
			notified: []sourcekind.Notification{
				{TagsPushed: tagsPushedTo(gitrepo.RepoKey("https://git.example.com/acme/tool.git"))},
				{TagsPushed: tagsPushedTo(gitrepo.RepoKey("https://git.example.com/acme/tool"))},
			},
			ignored: []sourcekind.Notification{
				{},
				{TagsPushed: tagsPushedTo(gitrepo.RepoKey("https://git.example.com/acme/other.git"))},
				{Released: "acme/tool"},
			},
		},
		{
			name:     "httpJSON",
			spec:     uprevv1.ReleaseSourceSpec{HTTPJSON: &uprevv1.HTTPJSONSource{URL: "https://bot:" + password + "@feed.example.com/releases.json", Versions: "{.releases[*].version}"}},
			short:    "json",
			url:      "https://bot:" + password + "@feed.example.com/releases.json",
			describe: "https://bot:xxxxx@feed.example.com/releases.json",
			from:     "https://bot:xxxxx@feed.example.com/releases.json {.releases[*].version}",
			ignored:  []sourcekind.Notification{{TagsPushed: func(string) bool { return true }}, {Released: "acme/tool"}},
		},
		{
			name:     "httpJSON with recursive descent",
			spec:     uprevv1.ReleaseSourceSpec{HTTPJSON: &uprevv1.HTTPJSONSource{URL: "https://feed.example.com/releases.json", Versions: "{..version}"}},
			short:    "json",
			url:      "https://feed.example.com/releases.json",
			describe: "https://feed.example.com/releases.json",
			from:     "https://feed.example.com/releases.json {..version}",
			check:    "spec.httpJSON.versions: ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			kind, err := sourcekind.Of(tc.spec)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(kind.Short()).To(Equal(tc.short))
			g.Expect(kind.URL()).To(Equal(tc.url))
			g.Expect(kind.Describe()).To(Equal(tc.describe))
			g.Expect(kind.From()).To(Equal(tc.from))
			g.Expect(kind.Describe() + kind.From()).NotTo(ContainSubstring(password))
			if tc.check == "" {
				g.Expect(kind.Check()).To(Succeed())
			} else {
				err := kind.Check()
				var field *sourcekind.FieldError
				g.Expect(errors.As(err, &field)).To(BeTrue(), "%v", err)
				g.Expect(err.Error()).To(HavePrefix(tc.check))
			}
			appURL, bearer, app := kind.GitHubApp()
			g.Expect([]any{appURL, bearer, app}).To(Equal([]any{tc.appURL, tc.bearer, tc.app}))
			for _, n := range tc.notified {
				g.Expect(kind.Notified(n)).To(BeTrue(), "%+v", n)
			}
			for _, n := range tc.ignored {
				g.Expect(kind.Notified(n)).To(BeFalse(), "%+v", n)
			}
		})
	}
}

// TestOfNeedsExactlyOneKind refuses a spec of no kind or of two, naming
// every kind's field.
func TestOfNeedsExactlyOneKind(t *testing.T) {
	for name, spec := range map[string]uprevv1.ReleaseSourceSpec{
		"none": {},
		"two": {
			GitTags:        &uprevv1.GitTagsSource{URL: "https://git.example.com/acme/tool.git"},
			GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "acme/tool"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			kind, err := sourcekind.Of(spec)
			g.Expect(kind).To(BeNil())
			var field *sourcekind.FieldError
			g.Expect(errors.As(err, &field)).To(BeTrue(), "%v", err)
			g.Expect(err).To(MatchError("spec: exactly one of gitTags, githubReleases, helmRepository and httpJSON must be set"))
		})
	}
}

// TestGitTagsListErrors sorts what a Git listing refuses before it reads
// anything, as gitrepo.Access does for every Git reader: a URL Git cannot
// read wraps ErrInvalidURL and names the field, a Secret that cannot work
// wraps ErrInvalidSecret.
func TestGitTagsListErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		url    string
		secret map[string][]byte
		check  func(g Gomega, err error)
	}{
		{
			name: "a scheme Git does not read",
			url:  "ftp://git.example.com/acme/tool.git",
			check: func(g Gomega, err error) {
				var git *sourcekind.GitError
				g.Expect(errors.As(err, &git)).To(BeTrue(), "%v", err)
				g.Expect(err).To(MatchError(gitrepo.ErrInvalidURL))
				g.Expect(err.Error()).To(HavePrefix("spec.gitTags.url: "))
			},
		},
		{
			name:   "a password without a username",
			url:    "https://git.example.com/acme/tool.git",
			secret: map[string][]byte{gitrepo.SecretPassword: []byte(password)},
			check: func(g Gomega, err error) {
				var git *sourcekind.GitError
				g.Expect(errors.As(err, &git)).To(BeTrue(), "%v", err)
				g.Expect(err).To(MatchError(gitrepo.ErrInvalidSecret))
				g.Expect(err.Error()).NotTo(ContainSubstring(password))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			kind, err := sourcekind.Of(uprevv1.ReleaseSourceSpec{GitTags: &uprevv1.GitTagsSource{URL: tc.url}})
			g.Expect(err).NotTo(HaveOccurred())
			_, err = kind.List(t.Context(), nil, "ns/tool", source.Access{Secret: tc.secret})
			g.Expect(err).To(HaveOccurred())
			tc.check(g, err)
		})
	}
}
