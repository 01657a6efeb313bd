package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
)

// releaseDownloads is a stand-in download host (as dl.k8s.io): files by
// path, and how often each was downloaded.
type releaseDownloads struct {
	mu    sync.Mutex
	files map[string]string
	gets  map[string]int
	URL   string
}

func startReleaseDownloads(t *testing.T) *releaseDownloads {
	d := &releaseDownloads{files: map[string]string{}, gets: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		content, ok := d.files[r.URL.Path]
		d.gets[r.URL.Path]++
		d.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, content)
	}))
	t.Cleanup(srv.Close)
	d.URL = srv.URL
	return d
}

// publish puts a file and its .sha256 (of sum's content) on the host.
func (d *releaseDownloads) publish(path, content, sumOf string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.files[path] = content
	d.files[path+".sha256"] = hexSHA256(sumOf) + "\n"
}

func (d *releaseDownloads) downloads(path string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gets[path]
}

func hexSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Kubernetes releases from the GitHub releases stand-in, kubeadm from a
// download host: the selected version's asset is pinned once, by its
// published checksum; a release whose checksum does not match is refused
// and the previous selection stays.
func TestReleaseSourcePinsAssetsByTheirChecksum(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	api := githubapi.StartReleases(t)
	api.SetReleases("kubernetes/kubernetes", githubapi.Release{TagName: "v1.30.2"})
	dl := startReleaseDownloads(t)
	dl.publish("/release/v1.30.2/bin/linux/amd64/kubeadm", "kubeadm 1.30.2", "kubeadm 1.30.2")

	rs := newReleaseSource(t, ns, "kubernetes", uprevv1.ReleaseSourceSpec{
		GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "kubernetes/kubernetes", URL: api.URL},
		Policy:         semverChoice("~1.30.0"),
		Assets: []uprevv1.AssetSpec{{
			Name:     "kubeadm",
			URL:      dl.URL + "/release/{{.Version}}/bin/linux/amd64/kubeadm",
			Checksum: &uprevv1.AssetChecksum{URL: dl.URL + "/release/{{.Version}}/bin/linux/amd64/kubeadm.sha256"},
		}},
	})
	pinned := []uprevv1.PinnedAsset{{
		Name: "kubeadm", URL: dl.URL + "/release/v1.30.2/bin/linux/amd64/kubeadm", SHA256: "sha256:" + hexSHA256("kubeadm 1.30.2"),
	}}
	g.Eventually(func(g Gomega) {
		latest := sourceLatest(g, rs)
		g.Expect(latest.Version).To(Equal("v1.30.2"))
		g.Expect(latest.Assets).To(Equal(pinned))
	}).Should(Succeed())

	// Scanned again, the same version is not downloaded again.
	scans := len(api.Requests())
	requestReconcile(t, rs)
	g.Eventually(func() int { return len(api.Requests()) }).Should(BeNumerically(">", scans))
	g.Eventually(func(g Gomega) { g.Expect(sourceLatest(g, rs).Assets).To(Equal(pinned)) }).Should(Succeed())
	g.Expect(dl.downloads("/release/v1.30.2/bin/linux/amd64/kubeadm")).To(Equal(1))

	// v1.30.3's checksum file names another hash: refused, v1.30.2 kept.
	dl.publish("/release/v1.30.3/bin/linux/amd64/kubeadm", "tampered kubeadm", "kubeadm 1.30.3")
	api.SetReleases("kubernetes/kubernetes", githubapi.Release{TagName: "v1.30.3"}, githubapi.Release{TagName: "v1.30.2"})
	requestReconcile(t, rs)
	g.Eventually(func(g Gomega) {
		ready := readyCondition(g, rs)
		g.Expect(ready.Reason).To(Equal(uprevv1.ChecksumMismatchReason))
		g.Expect(ready.Message).To(ContainSubstring("version v1.30.3 refused (keeping v1.30.2)"))
		g.Expect(ready.Message).To(ContainSubstring("sha256:" + hexSHA256("tampered kubeadm")))
		g.Expect(rs.Status.Latest.Version).To(Equal("v1.30.2"))
		g.Expect(rs.Status.Latest.Assets).To(Equal(pinned))
	}).Should(Succeed())

	// Fixed upstream, the next scan pins it.
	dl.publish("/release/v1.30.3/bin/linux/amd64/kubeadm", "kubeadm 1.30.3", "kubeadm 1.30.3")
	requestReconcile(t, rs)
	g.Eventually(func(g Gomega) {
		latest := sourceLatest(g, rs)
		g.Expect(latest.Version).To(Equal("v1.30.3"))
		g.Expect(latest.Assets[0].SHA256).To(Equal("sha256:" + hexSHA256("kubeadm 1.30.3")))
	}).Should(Succeed())
}
