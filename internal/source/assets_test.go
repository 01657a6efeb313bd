package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
)

// downloadHost serves release files: /release/<version>/kubeadm and its
// .sha256 (bare) and SHA256SUMS (sha256sum's lines), recording the
// Authorization headers it sees.
type downloadHost struct {
	*httptest.Server
	files map[string]string
	auth  atomic.Value
}

func startDownloadHost(t *testing.T, files map[string]string) *downloadHost {
	d := &downloadHost{files: files}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			d.auth.Store(a)
		}
		content, ok := d.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, content)
	}))
	t.Cleanup(d.Close)
	return d
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestPinAssetsChecksAgainstThePublishedChecksum(t *testing.T) {
	g := NewWithT(t)
	kubeadm := "kubeadm binary v1.30.2"
	host := startDownloadHost(t, map[string]string{
		"/release/v1.30.2/kubeadm":        kubeadm,
		"/release/v1.30.2/kubeadm.sha256": sha256Hex(kubeadm) + "\n",
		"/release/v1.30.2/kubelet":        "kubelet",
		"/release/v1.30.2/SHA256SUMS":     sha256Hex("other") + "  kubectl\n" + sha256Hex("kubelet") + " *kubelet\n",
	})
	assets, err := NewClient(Options{}).PinAssets(context.Background(), Access{}, "https://api.github.com", "v1.30.2", []AssetSpec{
		{Name: "kubeadm", URL: host.URL + "/release/{{.Version}}/kubeadm", ChecksumURL: host.URL + "/release/{{.Version}}/kubeadm.sha256"},
		{Name: "kubelet", URL: host.URL + "/release/{{.Version}}/kubelet", ChecksumURL: host.URL + "/release/{{.Version}}/SHA256SUMS"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(assets).To(Equal([]Asset{
		{Name: "kubeadm", URL: host.URL + "/release/v1.30.2/kubeadm", SHA256: "sha256:" + sha256Hex(kubeadm)},
		{Name: "kubelet", URL: host.URL + "/release/v1.30.2/kubelet", SHA256: "sha256:" + sha256Hex("kubelet")},
	}))
}

// A checksum file with another hash refuses the asset, naming both.
func TestPinAssetsRefusesAWrongChecksum(t *testing.T) {
	g := NewWithT(t)
	host := startDownloadHost(t, map[string]string{
		"/v1/tool":        "tampered",
		"/v1/tool.sha256": sha256Hex("original"),
	})
	_, err := NewClient(Options{}).PinAssets(context.Background(), Access{}, "", "v1", []AssetSpec{
		{Name: "tool", URL: host.URL + "/{{.Version}}/tool", ChecksumURL: host.URL + "/{{.Version}}/tool.sha256"},
	})
	var mismatch *ChecksumMismatchError
	g.Expect(errors.As(err, &mismatch)).To(BeTrue(), "%v", err)
	g.Expect(mismatch.Published).To(Equal("sha256:" + sha256Hex("original")))
	g.Expect(mismatch.Computed).To(Equal("sha256:" + sha256Hex("tampered")))
	g.Expect(errors.Is(err, ErrChecksumMismatch)).To(BeTrue())
}

// An asset larger than the bound is refused while it streams, whether its
// length is declared or not.
func TestPinAssetsRefusesAnAssetLargerThanTheBound(t *testing.T) {
	g := NewWithT(t)
	var written atomic.Int64
	const size = 64 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 32<<10))
		for sent := 0; sent < size; sent += len(chunk) {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	_, err := NewClient(Options{MaxAssetBytes: 1 << 20}).PinAssets(context.Background(), Access{}, "", "v1", []AssetSpec{{Name: "big", URL: srv.URL + "/{{.Version}}/big"}})
	g.Expect(errors.Is(err, ErrInvalidResponse)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("more than the bound of 1048576 bytes"))
	srv.CloseClientConnections()
	g.Expect(written.Load()).To(BeNumerically("<", size))
}

// The source's credentials go to assets on the source's own host only; an
// asset elsewhere, or a redirect elsewhere, never sees them.
func TestPinAssetsSendsCredentialsToTheSourceHostOnly(t *testing.T) {
	g := NewWithT(t)
	cdn := startDownloadHost(t, map[string]string{"/v1/tool": "tool"})
	own := startDownloadHost(t, map[string]string{"/v1/private": "private"})
	mux := http.NewServeMux()
	mux.Handle("/v1/redirected", http.RedirectHandler(cdn.URL+"/v1/tool", http.StatusFound))
	mux.Handle("/", own.Config.Handler)
	ownWithRedirect := httptest.NewServer(mux)
	t.Cleanup(ownWithRedirect.Close)

	access := Access{Secret: map[string][]byte{"bearerToken": []byte("source-token")}}
	assets, err := NewClient(Options{}).PinAssets(context.Background(), access, ownWithRedirect.URL, "v1", []AssetSpec{
		{Name: "private", URL: ownWithRedirect.URL + "/{{.Version}}/private"},
		{Name: "elsewhere", URL: cdn.URL + "/{{.Version}}/tool"},
		{Name: "redirected", URL: ownWithRedirect.URL + "/{{.Version}}/redirected"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(assets).To(HaveLen(3))
	g.Expect(assets[2].SHA256).To(Equal("sha256:" + sha256Hex("tool")))
	g.Expect(own.auth.Load()).To(Equal("Bearer source-token"))
	g.Expect(cdn.auth.Load()).To(BeNil(), "another host saw the source's token")
}

func TestParseChecksumFile(t *testing.T) {
	sum := sha256Hex("x")
	for name, tc := range map[string]struct {
		content, file, want string
	}{
		"bare":             {sum + "\n", "tool", "sha256:" + sum},
		"sha256sum":        {sha256Hex("y") + "  other\n" + sum + "  tool\n", "tool", "sha256:" + sum},
		"binary mode":      {sum + " *tool\n", "tool", "sha256:" + sum},
		"path in the file": {sum + "  bin/linux/tool\n", "tool", "sha256:" + sum},
		"not named":        {sum + "  other\n", "tool", ""},
		"html":             {"<html>not found</html>", "tool", ""},
		"uppercase":        {strings.ToUpper(sum), "tool", "sha256:" + sum},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseChecksumFile([]byte(tc.content), tc.file)
			if tc.want == "" {
				if !errors.Is(err, ErrInvalidResponse) {
					t.Fatalf("got %q, %v; want ErrInvalidResponse", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestAssetURL(t *testing.T) {
	g := NewWithT(t)
	u, err := AssetURL("https://dl.k8s.io/release/{{.Version}}/bin/linux/amd64/kubeadm", "v1.30.2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u).To(Equal("https://dl.k8s.io/release/v1.30.2/bin/linux/amd64/kubeadm"))
	for _, bad := range []string{"https://x/{{.Nope}}", "https://x/{{.Version", "file:///etc/{{.Version}}"} {
		_, err := AssetURL(bad, "v1")
		g.Expect(errors.Is(err, ErrInvalidConfig)).To(BeTrue(), fmt.Sprint(bad, err))
	}
}
