package registry

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushImage pushes a small random image as repo:tag and returns its digest.
// Every call pushes a different image, so digests differ between calls.
func (r *Registry) PushImage(t testing.TB, repo, tag string) string {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatalf("making a random image: %v", err)
	}
	ref, err := name.NewTag(r.Image(repo)+":"+tag, name.Insecure)
	if err != nil {
		t.Fatalf("parsing image name: %v", err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(handlerTransport{r})); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatalf("computing the digest of %s: %v", ref, err)
	}
	return digest.String()
}

// PushTags pushes one small random image and tags it with every tag in tags.
// It writes the manifest once and then only tags it, so tens of thousands
// of tags take well under a second.
func (r *Registry) PushTags(t testing.TB, repo string, tags ...string) {
	t.Helper()
	if len(tags) == 0 {
		return
	}
	r.PushImage(t, repo, tags[0])
	get := httptest.NewRequest(http.MethodGet, "/v2/"+repo+"/manifests/"+tags[0], nil)
	got := httptest.NewRecorder()
	r.store.ServeHTTP(got, get)
	if got.Code != http.StatusOK {
		t.Fatalf("reading back %s:%s: status %d", repo, tags[0], got.Code)
	}
	manifest, mediaType := got.Body.Bytes(), got.Header().Get("Content-Type")
	defer r.forgetTags()
	for _, tag := range tags[1:] {
		put := httptest.NewRequest(http.MethodPut, "/v2/"+repo+"/manifests/"+tag, bytes.NewReader(manifest))
		put.Header.Set("Content-Type", mediaType)
		rec := httptest.NewRecorder()
		r.store.ServeHTTP(rec, put)
		if rec.Code != http.StatusCreated {
			t.Fatalf("tagging %s:%s: status %d: %s", repo, tag, rec.Code, rec.Body)
		}
	}
}

// testLog writes the server's own log lines (TLS handshake failures) to the
// test log.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// handlerTransport serves requests with the registry's storage handler in
// process, skipping the network, auth, throttling and counting.
type handlerTransport struct{ r *Registry }

func (h handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		defer h.r.forgetTags()
	}
	served := req.Clone(req.Context())
	if served.Body == nil {
		// Handlers expect a body on every request, as a server gives them.
		served.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	h.r.store.ServeHTTP(rec, served)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}
