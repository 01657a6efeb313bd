package registry

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Hostile answers, for WithWrap: a registry that answers slowly or never,
// lists more referrers than anyone pushed, or sends a huge blob.

// SlowFor makes the registry slow for the requests match picks: it
// answers them after delay, or never (delay 0: until the client gives
// up).
func SlowFor(match func(*http.Request) bool, delay time.Duration) func(http.Handler) http.Handler {
	return func(store http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if match(req) {
				var after <-chan time.Time
				if delay > 0 {
					after = time.After(delay)
				}
				select {
				case <-after:
				case <-req.Context().Done():
					return
				}
			}
			store.ServeHTTP(w, req)
		})
	}
}

// RepeatReferrers answers a listing of the referrers of a digest that
// match picks with n of them: the referrer last (a digest) last, and the
// others the registry holds over and over before it.
func RepeatReferrers(n int, match func(digest string) bool, last string) func(http.Handler) http.Handler {
	return func(store http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			_, digest, ok := strings.Cut(req.URL.Path, "/referrers/")
			if !ok || !match(digest) {
				store.ServeHTTP(w, req)
				return
			}
			rec := httptest.NewRecorder()
			store.ServeHTTP(rec, req)
			index, err := v1.ParseIndexManifest(rec.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			var others, tail []v1.Descriptor
			for _, m := range index.Manifests {
				if m.Digest.String() == last {
					tail = append(tail, m)
				} else {
					others = append(others, m)
				}
			}
			if len(others) == 0 {
				http.Error(w, "no referrers to repeat", http.StatusInternalServerError)
				return
			}
			index.Manifests = nil
			for i := 0; len(index.Manifests) < n-len(tail); i++ {
				index.Manifests = append(index.Manifests, others[i%len(others)])
			}
			index.Manifests = append(index.Manifests, tail...)
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
			_ = json.NewEncoder(w).Encode(index)
		})
	}
}

// HugeBlob serves Size bytes of junk as the blob of Digest, a digest of
// nothing, and counts the bytes it got to write.
type HugeBlob struct {
	// Digest is the blob's digest.
	Digest v1.Hash
	// Size is how many bytes are served.
	Size int
	// Prefix, when set, is served first, and the junk ('x', a base64
	// character) after it: a JSON document that seems to go on.
	Prefix []byte
	served atomic.Int64
}

// NewHugeBlob is a HugeBlob of size bytes at a random digest.
func NewHugeBlob(t testing.TB, size int) *HugeBlob {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return &HugeBlob{Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(b)}, Size: size}
}

// Served is the number of bytes of the blob written so far.
func (h *HugeBlob) Served() int64 { return h.served.Load() }

// Wrap serves the blob, and passes other requests on to store.
func (h *HugeBlob) Wrap(store http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasSuffix(req.URL.Path, "/blobs/"+h.Digest.String()) {
			store.ServeHTTP(w, req)
			return
		}
		n, err := w.Write(h.Prefix)
		h.served.Add(int64(n))
		if err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for sent := n; sent < h.Size; sent += len(chunk) {
			n, err := w.Write(chunk)
			h.served.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
}

// OneLayer is a manifest of one layer of mediaType that says it has size
// bytes at digest, with an artifact type (config media type) of
// artifactType, and subject when not nil: with PushManifest, an
// attestation whose manifest lies, or whose blob is huge.
func OneLayer(artifactType string, mediaType types.MediaType, size int64, digest v1.Hash, subject *v1.Descriptor) *v1.Manifest {
	config := []byte("{}")
	configDigest, _, _ := v1.SHA256(bytes.NewReader(config))
	return &v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.MediaType(artifactType), Size: int64(len(config)), Digest: configDigest},
		Layers:        []v1.Descriptor{{MediaType: mediaType, Size: size, Digest: digest}},
		Subject:       subject,
	}
}

// Wraps combines wrappers for WithWrap, the first outermost.
func Wraps(wraps ...func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(store http.Handler) http.Handler {
		for _, w := range slices.Backward(wraps) {
			store = w(store)
		}
		return store
	}
}
