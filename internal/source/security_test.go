package source

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/testenv/tarpit"
)

// hugeIndex serves an index.yaml of size bytes (a valid start, then
// comment lines), with or without a Content-Length, counting the bytes it
// managed to write.
func hugeIndex(size int64, declareLength bool, written *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if declareLength {
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		}
		head := helmIndex("podinfo", "1.0.0")
		n, _ := io.WriteString(w, head)
		written.Add(int64(n))
		line := []byte("# " + strings.Repeat("x", 1021) + "\n")
		for sent := int64(n); sent < size; sent += int64(len(line)) {
			m, err := w.Write(line)
			written.Add(int64(m))
			if err != nil {
				return
			}
		}
	}
}

// An index.yaml of 100 MiB is refused at the bound, not read to its end
// and not parsed, whether the server declares its length or streams it.
func TestHelmIndexOf100MiBIsRefused(t *testing.T) {
	for _, declare := range []bool{true, false} {
		t.Run("Content-Length "+strconv.FormatBool(declare), func(t *testing.T) {
			g := NewWithT(t)
			var written atomic.Int64
			srv := httptest.NewServer(hugeIndex(100<<20, declare, &written))
			t.Cleanup(srv.Close)
			_, err := NewClient(Options{}).ListHelmChart(context.Background(), "ns/huge", Access{}, srv.URL, "podinfo")
			g.Expect(errors.Is(err, ErrInvalidResponse)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring("bound of %d", DefaultMaxBytes))
			srv.CloseClientConnections()
			g.Expect(written.Load()).To(BeNumerically("<", 100<<20), "the whole index was sent and read")
		})
	}
}

// A feed that answers with an HTML page (a login page, a proxy's error) is
// a clear error naming what came, not an empty list.
func TestFeedReturningHTMLIsAClearError(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><html><body>Sign in</body></html>")
	}))
	t.Cleanup(srv.Close)
	c := NewClient(Options{})

	_, err := c.ListJSON(context.Background(), "ns/feed", Access{}, srv.URL+"/version.json", "{.edge}")
	g.Expect(errors.Is(err, ErrInvalidResponse)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(`not a JSON document (Content-Type "text/html; charset=utf-8")`))

	_, err = c.ListHelmChart(context.Background(), "ns/chart", Access{}, srv.URL, "podinfo")
	g.Expect(errors.Is(err, ErrInvalidResponse)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("not a Helm repository index"))

	_, err = c.ListGitHubReleases(context.Background(), "ns/gh", Access{}, srv.URL, "o/r")
	g.Expect(errors.Is(err, ErrInvalidResponse)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("not a JSON list of releases"))
}

// A redirect to another host is refused before anything is sent there:
// the other host never sees the request, nor the source's credentials.
func TestRedirectToAnotherHostIsRefused(t *testing.T) {
	g := NewWithT(t)
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		_, _ = io.WriteString(w, helmIndex("podinfo", "9.9.9"))
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.RedirectHandler(other.URL+"/index.yaml", http.StatusFound))
	t.Cleanup(srv.Close)
	access := Access{Secret: map[string][]byte{"bearerToken": []byte("s3cr3t-token")}}

	_, err := NewClient(Options{}).ListHelmChart(context.Background(), "ns/redirect", access, srv.URL, "podinfo")
	g.Expect(errors.Is(err, ErrInvalidResponse)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("another host or scheme"))
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t"))
	g.Expect(elsewhere.Load()).To(BeZero(), "the other host was asked")
}

// A redirect on the same host is followed, with the credentials.
func TestRedirectOnTheSameHostIsFollowed(t *testing.T) {
	g := NewWithT(t)
	mux := http.NewServeMux()
	mux.Handle("/old/index.yaml", http.RedirectHandler("/new/index.yaml", http.StatusMovedPermanently))
	mux.HandleFunc("/new/index.yaml", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, helmIndex("podinfo", "1.2.3"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	listing, err := NewClient(Options{}).ListHelmChart(context.Background(), "ns/moved",
		Access{Secret: map[string][]byte{"bearerToken": []byte("t")}}, srv.URL+"/old", "podinfo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listing.Names()).To(Equal([]string{"1.2.3"}))
}

// The manager's denied ranges (--registry-deny-cidrs) apply to sources:
// a source on a denied address is not connected to.
func TestDeniedAddressesAreNotConnectedTo(t *testing.T) {
	g := NewWithT(t)
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { asked.Add(1) }))
	t.Cleanup(srv.Close)
	deny, err := outbound.Parse([]string{"127.0.0.0/8"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = NewClient(Options{DenyCIDRs: deny}).ListJSON(context.Background(), "ns/feed", Access{}, srv.URL, "{.edge}")
	g.Expect(errors.Is(err, outbound.ErrDenied)).To(BeTrue(), "%v", err)
	g.Expect(errors.Is(err, ErrUnreachable)).To(BeTrue(), "%v", err)
	g.Expect(asked.Load()).To(BeZero())
}

// A server that never answers fails the scan at the source's timeout,
// naming the host.
func TestTarpitFailsAtTheTimeout(t *testing.T) {
	g := NewWithT(t)
	tp := tarpit.Start(t)
	start := time.Now()
	_, err := NewClient(Options{}).ListJSON(context.Background(), "ns/slow", Access{Timeout: 300 * time.Millisecond}, "http://"+tp.Addr()+"/version.json", "{.edge}")
	g.Expect(errors.Is(err, ErrUnreachable)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("no answer from " + tp.Addr() + " within the source's timeout"))
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
}

// A Secret with a token and a password is refused before any request.
func TestAmbiguousSecretIsRefused(t *testing.T) {
	g := NewWithT(t)
	_, err := NewClient(Options{}).ListJSON(context.Background(), "ns/feed",
		Access{Secret: map[string][]byte{"bearerToken": []byte("a"), "password": []byte("b")}}, "https://example.com/v.json", "{.edge}")
	g.Expect(errors.Is(err, ErrInvalidConfig)).To(BeTrue(), "%v", err)
}

// A page of releases whose Link header sends the next page to another
// host is refused; that host is never asked.
func TestGitHubNextPageOnAnotherHostIsRefused(t *testing.T) {
	g := NewWithT(t)
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		_, _ = io.WriteString(w, `[]`)
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", `<`+other.URL+`/repos/o/r/releases?page=2>; rel="next"`)
		_, _ = io.WriteString(w, `[{"tag_name":"v1.0.0"}]`)
	}))
	t.Cleanup(srv.Close)
	_, err := NewClient(Options{}).ListGitHubReleases(context.Background(), "ns/gh",
		Access{Secret: map[string][]byte{"bearerToken": []byte("t")}}, srv.URL, "o/r")
	g.Expect(errors.Is(err, ErrInvalidResponse)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("the next page's link goes to"))
	g.Expect(elsewhere.Load()).To(BeZero())
}
