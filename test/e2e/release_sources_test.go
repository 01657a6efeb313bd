package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/webhook"
)

// staticHost is a plain HTTP server of the files in a directory, as a
// download host, a classic Helm repository or a release feed publishes
// them: net/http's file server, with Content-Length, Last-Modified and 304
// Not Modified answers to If-Modified-Since.
type staticHost struct {
	// URL is the host's base URL.
	URL string
	dir string

	mu sync.Mutex
	// written counts the writes, which get modification times a minute
	// apart, so that a rewrite is never taken for the same file.
	written int
}

// startStaticHost starts a static host, stopped when the test ends.
func startStaticHost(t testing.TB) *staticHost {
	t.Helper()
	h := &staticHost{dir: t.TempDir()}
	srv := httptest.NewServer(http.FileServer(http.Dir(h.dir)))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

// write publishes content at the URL path p.
func (h *staticHost) write(t testing.TB, p, content string) {
	t.Helper()
	file := filepath.Join(h.dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	h.touch(t, file)
}

// touch gives file a modification time later than every earlier write's.
func (h *staticHost) touch(t testing.TB, file string) {
	t.Helper()
	h.mu.Lock()
	h.written++
	when := time.Now().Add(time.Duration(h.written) * time.Minute)
	h.mu.Unlock()
	if err := os.Chtimes(file, when, when); err != nil {
		t.Fatal(err)
	}
}

// publishAsset publishes a file and, next to it, its .sha256 as dl.k8s.io
// does (the hex SHA-256 and a newline); it returns the file's sha256:<hex>.
func (h *staticHost) publishAsset(t testing.TB, p, content string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	h.write(t, p, content)
	h.write(t, p+".sha256", hex.EncodeToString(sum[:])+"\n")
	return "sha256:" + hex.EncodeToString(sum[:])
}

// publishCharts makes the directory dir of the host a classic Helm
// repository holding chart at versions besides what it held: each version
// packaged by Helm (a chart archive with one template), and index.yaml
// written by Helm's own repo types from the archives (helm repo index):
// archive URLs under the host, a SHA-256 digest each. It returns the
// archives' sha256:<hex> by version.
func (h *staticHost) publishCharts(t testing.TB, dir, name string, versions ...string) map[string]string {
	t.Helper()
	repoDir := filepath.Join(h.dir, dir)
	digests := map[string]string{}
	for _, v := range versions {
		c := &chart.Chart{
			Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: v, AppVersion: v},
			Templates: []*chartcommon.File{{Name: "templates/configmap.yaml",
				Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n")}},
		}
		archive, err := chartutil.Save(c, repoDir)
		if err != nil {
			t.Fatalf("packaging %s %s: %v", name, v, err)
		}
		data, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		digests[v] = "sha256:" + hex.EncodeToString(sum[:])
	}
	index, err := repo.IndexDirectory(repoDir, h.URL+"/"+dir)
	if err != nil {
		t.Fatalf("indexing %s: %v", repoDir, err)
	}
	index.SortEntries()
	indexFile := filepath.Join(repoDir, "index.yaml")
	if err := index.WriteFile(indexFile, 0o644); err != nil {
		t.Fatal(err)
	}
	h.touch(t, indexFile)
	return digests
}

// waitForSource waits until the ReleaseSource is Ready with version
// selected and returns its status.latest.
func waitForSource(t testing.TB, rs *uprevv1.ReleaseSource, version string) *uprevv1.SourceVersion {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		get(g, rs)
		g.Expect(conditions.IsReady(rs)).To(BeTrue(), "not ready: %s", conditions.GetMessage(rs, meta.ReadyCondition))
		g.Expect(rs.Status.Latest).NotTo(BeNil())
		g.Expect(rs.Status.Latest.Version).To(Equal(version))
	}).Should(Succeed())
	return rs.Status.Latest
}

// sourceUpdate is the message of a commit moving the ReleaseSource
// ns/name from old to new with the changes lines ("file: old --> new").
func sourceUpdate(ns, name, old, new string, changes ...string) string {
	return fmt.Sprintf("Update %s to %s\n\n%s\n\nUprev-Update: ReleaseSource/%s/%s %s --> %s",
		name, new, strings.Join(changes, "\n"), ns, name, old, new)
}

// TestReleaseFeedFollowsTheEdgeChannel runs examples/release-feed: a
// Linkerd-style version.json on an HTTP host; the automation writes its
// edge release, and the next one when the feed announces it.
func TestReleaseFeedFollowsTheEdgeChannel(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const example = "release-feed"
	s := newScenario(t, example)
	s.rename(example, s.ns)
	feed := startStaticHost(t)
	feed.write(t, "/version.json", `{"stable":"stable-2.14.10","edge":"edge-24.11.8"}`)
	s.rename("https://versioncheck.linkerd.io", feed.URL)
	fleet := s.exampleFleet(example)
	s.initRepo(fleet)
	objs := s.exampleObjects(example)
	rs := object[*uprevv1.ReleaseSource](t, objs, "linkerd-edge")
	auto := object[*uprevv1.UpdateAutomation](t, objs, "mesh")
	const file = "clusters/mesh/linkerd.yaml"

	create(t, rs)
	waitForSource(t, rs, "edge-24.11.8")
	create(t, auto)
	first := waitForPush(t, auto, "")
	g.Expect(s.message(first)).To(Equal(sourceUpdate(s.ns, "linkerd-edge", "edge-24.11.7", "edge-24.11.8",
		file+": edge-24.11.7 --> edge-24.11.8")))
	g.Expect(s.readFile("main", file)).To(Equal(strings.Replace(fleet[file], "version: edge-24.11.7 #", "version: edge-24.11.8 #", 1)))

	// The feed announces the next edge release.
	feed.write(t, "/version.json", `{"stable":"stable-2.14.10","edge":"edge-24.12.1"}`)
	requestReconcile(t, rs)
	waitForSource(t, rs, "edge-24.12.1")
	second := waitForPush(t, auto, first)
	g.Expect(s.subjects("main")).To(Equal([]string{"Update linkerd-edge to edge-24.12.1", "Update linkerd-edge to edge-24.11.8", "Initial commit"}))
	g.Expect(s.changedFiles(second)).To(Equal([]string{file}))
	g.Expect(s.readFile("main", file)).To(Equal(strings.Replace(fleet[file], "version: edge-24.11.7 #", "version: edge-24.12.1 #", 1)))
}

// TestHelmRepositoryChartFollowsItsRange runs examples/helm-repository: a
// classic Helm repository (chart archives and the index.yaml Helm writes,
// served over HTTP); the source selects the newest version in range,
// with the archive's URL and digest, and the automation writes the
// HelmRelease's chart version.
func TestHelmRepositoryChartFollowsItsRange(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const example = "helm-repository"
	s := newScenario(t, example)
	s.rename(example, s.ns)
	host := startStaticHost(t)
	digests := host.publishCharts(t, "podinfo", "podinfo", "5.2.1", "6.5.0", "6.6.3", "6.7.1", "6.8.0-rc.1", "7.0.0")
	s.rename("https://stefanprodan.github.io/podinfo", host.URL+"/podinfo")
	fleet := s.exampleFleet(example)
	s.initRepo(fleet)
	objs := s.exampleObjects(example)
	rs := object[*uprevv1.ReleaseSource](t, objs, "podinfo")
	auto := object[*uprevv1.UpdateAutomation](t, objs, "apps")
	const file = "clusters/apps/podinfo.yaml"

	create(t, rs)
	g.Expect(*waitForSource(t, rs, "6.7.1")).To(Equal(uprevv1.SourceVersion{
		Version: "6.7.1",
		URL:     host.URL + "/podinfo/podinfo-6.7.1.tgz",
		Digest:  digests["6.7.1"],
	}))
	create(t, auto)
	first := waitForPush(t, auto, "")
	g.Expect(s.message(first)).To(Equal(sourceUpdate(s.ns, "podinfo", "6.5.0", "6.7.1", file+": 6.5.0 --> 6.7.1")))
	g.Expect(s.readFile("main", file)).To(Equal(strings.Replace(fleet[file], "version: 6.5.0 #", "version: 6.7.1 #", 1)))
}

// TestComponentHashesPinKubernetesFiles runs examples/component-hashes:
// Kubernetes releases from a stand-in of GitHub's releases API (with the
// example's token), the node binaries and their .sha256 files from a
// download host; the automation writes the version, each file's URL and
// its sha256: hash in one commit.
func TestComponentHashesPinKubernetesFiles(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const example = "component-hashes"
	s := newScenario(t, example)
	s.rename(example, s.ns)
	api := githubapi.StartReleases(t)
	api.RequireToken("ghp_e2e")
	api.SetReleases("kubernetes/kubernetes",
		githubapi.Release{TagName: "v1.31.0"},
		githubapi.Release{TagName: "v1.30.9", Draft: true},
		githubapi.Release{TagName: "v1.30.3-rc.0", Prerelease: true},
		githubapi.Release{TagName: "v1.30.2"},
		githubapi.Release{TagName: "v1.30.1"},
	)
	dl := startStaticHost(t)
	binaries := []string{"kubeadm", "kubelet", "kubectl"}
	hashes := map[string]string{}
	for _, bin := range binaries {
		hashes[bin] = dl.publishAsset(t, "/release/v1.30.2/bin/linux/amd64/"+bin, bin+" v1.30.2 linux/amd64\n")
	}
	s.rename("https://api.github.com", api.URL)
	s.rename("https://dl.k8s.io", dl.URL)
	fleet := s.exampleFleet(example)
	s.initRepo(fleet)
	objs := s.exampleObjects(example)
	rs := object[*uprevv1.ReleaseSource](t, objs, "kubernetes")
	auto := object[*uprevv1.UpdateAutomation](t, objs, "components")
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: rs.Spec.SecretRef.Name},
		Data:       map[string][]byte{"bearerToken": []byte("ghp_e2e")},
	})
	const file = "clusters/platform/k8s-components.yaml"
	zero := "sha256:" + strings.Repeat("0", 64)

	create(t, rs)
	latest := waitForSource(t, rs, "v1.30.2")
	var pinned []uprevv1.PinnedAsset
	for _, bin := range binaries {
		pinned = append(pinned, uprevv1.PinnedAsset{Name: bin, URL: dl.URL + "/release/v1.30.2/bin/linux/amd64/" + bin, SHA256: hashes[bin]})
	}
	g.Expect(latest.Assets).To(Equal(pinned))
	create(t, auto)
	first := waitForPush(t, auto, "")

	want := fleet[file]
	changes := []string{file + ": v1.30.1 --> v1.30.2"}
	want = strings.Replace(want, "version: v1.30.1 #", "version: v1.30.2 #", 1)
	for _, bin := range binaries {
		oldURL := dl.URL + "/release/v1.30.1/bin/linux/amd64/" + bin
		newURL := dl.URL + "/release/v1.30.2/bin/linux/amd64/" + bin
		want = strings.Replace(want, bin+"-url: "+oldURL+" #", bin+"-url: "+newURL+" #", 1)
		want = strings.Replace(want, bin+"-hash: "+zero+" #", bin+"-hash: "+hashes[bin]+" #", 1)
		changes = append(changes, file+": "+oldURL+" --> "+newURL, file+": "+zero+" --> "+hashes[bin])
	}
	g.Expect(s.readFile("main", file)).To(Equal(want))
	g.Expect(s.message(first)).To(Equal(sourceUpdate(s.ns, "kubernetes", "v1.30.1", "v1.30.2", changes...)))
	g.Expect(s.changedFiles(first)).To(Equal([]string{file}))
	for _, r := range api.Requests() {
		g.Expect(r.Header.Get("Authorization")).To(Equal("Bearer ghp_e2e"))
	}
}

// TestGitTagsPinTheTagFluxDeploys runs examples/git-tags: the tags of a
// repository on the test bed's Git server, listed without a clone; the
// automation pins the Flux GitRepository's ref.tag, and a tag push sent
// to the Git webhook receiver brings the next scan, and commit, forward.
func TestGitTagsPinTheTagFluxDeploys(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const example = "git-tags"
	s := newScenario(t, example)
	s.rename(example, s.ns)
	upstream := s.git.InitRepo(t, "podinfo", "master", map[string]string{"README.md": "# podinfo\n"})
	for _, tag := range []string{"5.2.1", "6.5.0", "6.6.3", "6.7.1", "7.0.0-rc.1", "not-a-release"} {
		s.git.Git(t, "podinfo", "tag", tag, "master")
	}
	s.rename("https://github.com/stefanprodan/podinfo", upstream)
	fleet := s.exampleFleet(example)
	s.initRepo(fleet)
	objs := s.exampleObjects(example)
	rs := object[*uprevv1.ReleaseSource](t, objs, "podinfo")
	auto := object[*uprevv1.UpdateAutomation](t, objs, "apps")
	const file = "clusters/apps/podinfo.yaml"
	token := s.webhookToken()

	create(t, rs)
	waitForSource(t, rs, "6.7.1")
	create(t, auto)
	first := waitForPush(t, auto, "")
	g.Expect(s.message(first)).To(Equal(sourceUpdate(s.ns, "podinfo", "6.5.0", "6.7.1", file+": 6.5.0 --> 6.7.1")))
	g.Expect(s.readFile("main", file)).To(Equal(strings.Replace(fleet[file], "tag: 6.5.0 #", "tag: 6.7.1 #", 1)))

	// podinfo tags 6.8.0; the forge's push event for the tag triggers the
	// source at once.
	s.git.Git(t, "podinfo", "tag", "6.8.0", "master")
	body := fmt.Sprintf(`{"ref":"refs/tags/6.8.0","repository":{"clone_url":%q}}`, upstream)
	g.Expect(s.notify(token, webhook.KindGit, http.Header{"X-GitHub-Event": {"push"}}, body)).To(
		ContainElement(path.Join("ReleaseSource", s.ns, "podinfo")))
	waitForSource(t, rs, "6.8.0")
	second := waitForPush(t, auto, first)
	g.Expect(s.message(second)).To(Equal(sourceUpdate(s.ns, "podinfo", "6.7.1", "6.8.0", file+": 6.7.1 --> 6.8.0")))
	g.Expect(s.readFile("main", file)).To(Equal(strings.Replace(fleet[file], "tag: 6.5.0 #", "tag: 6.8.0 #", 1)))
}
