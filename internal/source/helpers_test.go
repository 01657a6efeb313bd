package source

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// counted wraps h, counting the requests it serves and the 304s among them.
type counted struct {
	h             http.Handler
	requests      atomic.Int64
	notModified   atomic.Int64
	authorization atomic.Value
}

func (c *counted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.requests.Add(1)
	if a := r.Header.Get("Authorization"); a != "" {
		c.authorization.Store(a)
	}
	rec := &statusRecorder{ResponseWriter: w}
	c.h.ServeHTTP(rec, r)
	if rec.status == http.StatusNotModified {
		c.notModified.Add(1)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// helmIndex returns an index.yaml with versions of chart, archives at
// relative URLs as `helm repo index` writes them.
func helmIndex(chart string, versions ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nentries:\n  " + chart + ":\n")
	for _, v := range versions {
		fmt.Fprintf(&b, "  - apiVersion: v2\n    name: %s\n    version: %s\n    appVersion: %q\n    digest: \"%064x\"\n    urls:\n    - %s-%s.tgz\n    created: \"2026-01-02T03:04:05Z\"\n",
			chart, v, v, len(v), chart, v)
	}
	b.WriteString("generated: \"2026-01-02T03:04:05Z\"\n")
	return b.String()
}

// startHelmRepository serves dir's files as a classic Helm repository is
// served: static files over HTTP, with Last-Modified and 304 answers to
// If-Modified-Since (net/http's file server).
func startHelmRepository(t testing.TB, files map[string]string) (*httptest.Server, *counted, string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := &counted{h: http.FileServer(http.Dir(dir))}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv, c, dir
}
