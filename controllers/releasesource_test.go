package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// chartIndex is an index.yaml with versions of chart, as `helm repo index`
// writes it: relative archive URLs, a digest per archive.
func chartIndex(chart string, versions ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nentries:\n  " + chart + ":\n")
	for _, v := range versions {
		fmt.Fprintf(&b, "  - apiVersion: v2\n    name: %s\n    version: %s\n    digest: \"%064x\"\n    urls:\n    - %s-%s.tgz\n", chart, v, len(v), chart, v)
	}
	return b.String()
}

// helmRepository is a classic Helm repository: static files over HTTP.
// Broken makes it answer every request with an HTML error page instead.
type helmRepository struct {
	URL    string
	dir    string
	broken atomic.Bool
}

func startHelmRepository(t *testing.T, index string) *helmRepository {
	t.Helper()
	h := &helmRepository{dir: t.TempDir()}
	h.setIndex(t, index)
	files := http.FileServer(http.Dir(h.dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.broken.Load() {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html><body>Maintenance</body></html>")
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

// setIndex writes index.yaml with a new modification time.
func (h *helmRepository) setIndex(t *testing.T, index string) {
	t.Helper()
	path := filepath.Join(h.dir, "index.yaml")
	if err := os.WriteFile(path, []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	when := time.Now().Add(time.Duration(len(index)) * time.Second)
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
}

// newReleaseSource creates a ReleaseSource scanned every hour (tests
// trigger scans with requestReconcile).
func newReleaseSource(t *testing.T, ns, name string, spec uprevv1.ReleaseSourceSpec) *uprevv1.ReleaseSource {
	t.Helper()
	if spec.Interval.Duration == 0 {
		spec.Interval = metav1.Duration{Duration: time.Hour}
	}
	rs := &uprevv1.ReleaseSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := k8s.Create(context.Background(), rs); err != nil {
		t.Fatalf("creating ReleaseSource: %v", err)
	}
	return rs
}

// sourceLatest returns the source's status.latest once it is Ready.
func sourceLatest(g Gomega, rs *uprevv1.ReleaseSource) *uprevv1.SourceVersion {
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rs), rs)).To(Succeed())
	g.Expect(conditions.IsReady(rs)).To(BeTrue(), "source not ready: %s", conditions.GetMessage(rs, meta.ReadyCondition))
	g.Expect(rs.Status.Latest).NotTo(BeNil())
	return rs.Status.Latest
}

func TestReleaseSourceHelmRepositoryFollowsTheChart(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := startHelmRepository(t, chartIndex("podinfo", "6.5.0", "6.5.4", "7.0.0"))
	rs := newReleaseSource(t, ns, "podinfo", uprevv1.ReleaseSourceSpec{
		HelmRepository: &uprevv1.HelmRepositorySource{URL: repo.URL, Chart: "podinfo"},
		Policy:         semverChoice("6.x"),
	})
	g.Eventually(func(g Gomega) {
		g.Expect(*sourceLatest(g, rs)).To(Equal(uprevv1.SourceVersion{
			Version: "6.5.4",
			URL:     repo.URL + "/podinfo-6.5.4.tgz",
			Digest:  "sha256:0000000000000000000000000000000000000000000000000000000000000005",
		}))
		g.Expect(rs.Status.LastScan.VersionCount).To(Equal(3))
		g.Expect(rs.Status.LastScan.LatestVersions).To(Equal([]string{"7.0.0", "6.5.4", "6.5.0"}))
		g.Expect(rs.Status.ObservedGeneration).To(Equal(rs.Generation))
	}).Should(Succeed())

	repo.setIndex(t, chartIndex("podinfo", "6.5.0", "6.5.4", "6.6.0", "7.0.0"))
	requestReconcile(t, rs)
	g.Eventually(func(g Gomega) {
		g.Expect(sourceLatest(g, rs).Version).To(Equal("6.6.0"))
		g.Expect(rs.Status.ObservedPrevious).NotTo(BeNil())
		g.Expect(rs.Status.ObservedPrevious.Version).To(Equal("6.5.4"))
		g.Expect(conditions.GetMessage(rs, meta.ReadyCondition)).To(Equal(
			"Latest version of chart podinfo of " + repo.URL + " resolved to 6.6.0 (4 versions)"))
	}).Should(Succeed())
}

// A scan that fails (the repository answers with an HTML page) marks the
// source not Ready with a named reason and keeps the last good selection.
func TestReleaseSourceKeepsTheLastSelectionOnError(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := startHelmRepository(t, chartIndex("podinfo", "6.5.4"))
	rs := newReleaseSource(t, ns, "podinfo", uprevv1.ReleaseSourceSpec{
		HelmRepository: &uprevv1.HelmRepositorySource{URL: repo.URL, Chart: "podinfo"},
		Policy:         semverChoice(">=6.0.0"),
	})
	g.Eventually(func(g Gomega) { g.Expect(sourceLatest(g, rs).Version).To(Equal("6.5.4")) }).Should(Succeed())

	repo.broken.Store(true)
	requestReconcile(t, rs)
	g.Eventually(func(g Gomega) {
		ready := readyCondition(g, rs)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(uprevv1.SourceInvalidReason))
		g.Expect(ready.Message).To(ContainSubstring("not a Helm repository index"))
		g.Expect(rs.Status.Latest).NotTo(BeNil())
		g.Expect(rs.Status.Latest.Version).To(Equal("6.5.4"))
	}).Should(Succeed())

	repo.broken.Store(false)
	requestReconcile(t, rs)
	g.Eventually(func(g Gomega) { g.Expect(sourceLatest(g, rs).Version).To(Equal("6.5.4")) }).Should(Succeed())

	// A policy that selects nothing keeps the selection too.
	g.Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(rs), rs); err != nil {
			return err
		}
		rs.Spec.Policy = semverChoice(">=9.0.0")
		return k8s.Update(context.Background(), rs)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		ready := readyCondition(g, rs)
		g.Expect(ready.Reason).To(Equal(uprevv1.NoMatchingVersionReason))
		g.Expect(rs.Status.Latest.Version).To(Equal("6.5.4"))
	}).Should(Succeed())
}

// GitHub releases through the stand-in, with a token: the token never
// reaches status or events; a used-up rate limit is reported as such.
func TestReleaseSourceGitHubReleases(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	api := githubapi.StartReleases(t)
	const token = "ghp_very-secret-token"
	api.RequireToken(token)
	api.SetReleases("kubernetes/kubernetes",
		githubapi.Release{TagName: "v1.31.0", Draft: true},
		githubapi.Release{TagName: "v1.30.3-rc.0", Prerelease: true},
		githubapi.Release{TagName: "v1.30.2", HTMLURL: "https://github.com/kubernetes/kubernetes/releases/tag/v1.30.2"},
		githubapi.Release{TagName: "v1.29.6"},
	)
	g.Expect(k8s.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "github"},
		Data:       map[string][]byte{"bearerToken": []byte(token)},
	})).To(Succeed())
	ref := metaRef("github")
	rs := newReleaseSource(t, ns, "kubernetes", uprevv1.ReleaseSourceSpec{
		GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "kubernetes/kubernetes", URL: api.URL},
		SecretRef:      &ref,
		Policy:         semverChoice(">=1.29.0"),
	})
	g.Eventually(func(g Gomega) {
		latest := sourceLatest(g, rs)
		g.Expect(latest.Version).To(Equal("v1.30.2"))
		g.Expect(latest.URL).To(Equal("https://github.com/kubernetes/kubernetes/releases/tag/v1.30.2"))
		g.Expect(rs.Status.LastScan.VersionCount).To(Equal(3), "a draft was listed")
	}).Should(Succeed())

	api.SetReleases("kubernetes/kubernetes", githubapi.Release{TagName: "v1.30.3"})
	api.SetRateLimit(0, time.Now().Add(time.Hour))
	requestReconcile(t, rs)
	g.Eventually(func(g Gomega) {
		ready := readyCondition(g, rs)
		g.Expect(ready.Reason).To(Equal(uprevv1.RateLimitedReason))
		g.Expect(ready.Message).To(ContainSubstring("rate-limits its API"))
		g.Expect(rs.Status.Latest.Version).To(Equal("v1.30.2"))
	}).Should(Succeed())

	status, err := json.Marshal(rs.Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring(token))
	var events eventsList
	g.Expect(k8s.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		g.Expect(e.Note).NotTo(ContainSubstring(token))
	}
}

// Git tags of the real Git server, with basic auth.
func TestReleaseSourceGitTags(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t, gitserver.WithBasicAuth("git", "s3cret"))
	srv.InitRepo(t, "tool", "main", map[string]string{"README": "tool\n"})
	for _, tag := range []string{"v0.9.0", "v1.0.0", "v1.1.0"} {
		srv.Git(t, "tool", "tag", tag, "main")
	}
	g.Expect(k8s.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git"},
		Data:       map[string][]byte{"username": []byte("git"), "password": []byte("s3cret")},
	})).To(Succeed())
	ref := metaRef("git")
	rs := newReleaseSource(t, ns, "tool", uprevv1.ReleaseSourceSpec{
		GitTags:   &uprevv1.GitTagsSource{URL: srv.HTTPURL("tool")},
		SecretRef: &ref,
		Policy:    semverChoice("^1.0.0"),
	})
	g.Eventually(func(g Gomega) { g.Expect(sourceLatest(g, rs).Version).To(Equal("v1.1.0")) }).Should(Succeed())

	srv.Git(t, "tool", "tag", "v1.2.0", "main")
	requestReconcile(t, rs)
	g.Eventually(func(g Gomega) { g.Expect(sourceLatest(g, rs).Version).To(Equal("v1.2.0")) }).Should(Succeed())
}

// Linkerd's release feed, its edge channel.
func TestReleaseSourceHTTPJSONFeed(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"stable":"stable-2.14.10","edge":"edge-24.11.8"}`)
	}))
	t.Cleanup(srv.Close)
	rs := newReleaseSource(t, ns, "linkerd-edge", uprevv1.ReleaseSourceSpec{
		HTTPJSON:   &uprevv1.HTTPJSONSource{URL: srv.URL + "/version.json", Versions: "{.edge}"},
		Policy:     imagev1.ImagePolicyChoice{Alphabetical: &imagev1.AlphabeticalPolicy{}},
		FilterTags: &imagev1.TagFilter{Pattern: `^edge-`},
	})
	g.Eventually(func(g Gomega) { g.Expect(sourceLatest(g, rs).Version).To(Equal("edge-24.11.8")) }).Should(Succeed())
}

// A policy or JSONPath that cannot work stalls the source with a named
// reason, before anything is read.
func TestReleaseSourceInvalidSpecStalls(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { asked.Add(1) }))
	t.Cleanup(srv.Close)
	badPolicy := newReleaseSource(t, ns, "bad-policy", uprevv1.ReleaseSourceSpec{
		HTTPJSON: &uprevv1.HTTPJSONSource{URL: srv.URL, Versions: "{.edge}"},
		Policy:   semverChoice("not a range"),
	})
	badPath := newReleaseSource(t, ns, "bad-path", uprevv1.ReleaseSourceSpec{
		HTTPJSON: &uprevv1.HTTPJSONSource{URL: srv.URL, Versions: "{.edge"},
		Policy:   semverChoice("*"),
	})
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, badPolicy).Reason).To(Equal(uprevv1.InvalidPolicyReason))
		g.Expect(conditions.IsStalled(badPolicy)).To(BeTrue())
		g.Expect(readyCondition(g, badPath).Reason).To(Equal(uprevv1.InvalidSpecReason))
		g.Expect(conditions.GetMessage(badPath, meta.ReadyCondition)).To(ContainSubstring("spec.httpJSON.versions"))
	}).Should(Succeed())
	g.Expect(asked.Load()).To(BeZero())
}

// The API server refuses a source of two kinds, or none.
func TestReleaseSourceNeedsExactlyOneKind(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	for name, spec := range map[string]uprevv1.ReleaseSourceSpec{
		"two": {
			HelmRepository: &uprevv1.HelmRepositorySource{URL: "https://charts.example.com", Chart: "x"},
			GitTags:        &uprevv1.GitTagsSource{URL: "https://git.example.com/x.git"},
		},
		"none": {},
	} {
		spec.Interval = metav1.Duration{Duration: time.Hour}
		spec.Policy = semverChoice("*")
		err := k8s.Create(context.Background(), &uprevv1.ReleaseSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec})
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(err.Error()).To(ContainSubstring("exactly one of helmRepository, githubReleases, gitTags and httpJSON must be set"))
	}
}

// TestReleaseSourceGitHubApp: a Secret with Flux's GitHub App keys is
// exchanged for an installation token, which the releases API gets as its
// bearer token; the app's key never leaves for the releases API.
func TestReleaseSourceGitHubApp(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	app := githubapi.Start(t)
	api := githubapi.StartReleases(t)
	api.RequireToken(app.Token)
	api.SetReleases("acme/agent", githubapi.Release{TagName: "v1.2.0"}, githubapi.Release{TagName: "v1.1.0"})
	g.Expect(k8s.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Data:       app.SecretData(),
	})).To(Succeed())
	ref := metaRef("app")
	rs := newReleaseSource(t, ns, "agent", uprevv1.ReleaseSourceSpec{
		GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "acme/agent", URL: api.URL},
		SecretRef:      &ref,
		Policy:         semverChoice(">=1.0.0"),
	})
	g.Eventually(func(g Gomega) {
		g.Expect(sourceLatest(g, rs).Version).To(Equal("v1.2.0"))
	}).Should(Succeed())
	g.Expect(app.Issued()).To(BeNumerically(">=", 1), "an installation token was asked for")
	for _, req := range api.Requests() {
		g.Expect(req.Header.Get("Authorization")).To(Equal("Bearer "+app.Token), "only the installation token reaches the releases API")
	}
}

// A Git server that advertises more references than the bound
// (gitrepo.MaxAdvertisedRefs) makes the source not Ready, SourceInvalid
// naming the bound, and keeps the last good selection.
func TestReleaseSourceGitTagsRefusesAHugeListing(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	srv.InitRepo(t, "tool", "main", map[string]string{"README": "tool\n"})
	srv.Git(t, "tool", "tag", "v1.0.0", "main")
	rs := newReleaseSource(t, ns, "tool", uprevv1.ReleaseSourceSpec{
		GitTags: &uprevv1.GitTagsSource{URL: srv.HTTPURL("tool")},
		Policy:  semverChoice("^1.0.0"),
	})
	g.Eventually(func(g Gomega) { g.Expect(sourceLatest(g, rs).Version).To(Equal("v1.0.0")) }).Should(Succeed())

	srv.AdvertiseRefs(t, "tool", "main", "heads/b", "", gitrepo.MaxAdvertisedRefs)
	requestReconcile(t, rs)
	g.Eventually(func(g Gomega) {
		ready := readyCondition(g, rs)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(uprevv1.SourceInvalidReason))
		g.Expect(ready.Message).To(ContainSubstring("more than %d references", gitrepo.MaxAdvertisedRefs))
		g.Expect(rs.Status.Latest.Version).To(Equal("v1.0.0"))
	}).Should(Succeed())
}
