package registry

import (
	"fmt"
	"io"
	"net/http"
	"strings"
)

// MaxManifestBytes bounds a manifest, an image index or a referrers index
// read from a registry: 4 MiB, the size the OCI distribution spec asks
// registries to accept at least, and the most Docker Hub stores.
// go-containerregistry reads up to 100 MiB of one before parsing it; a
// hostile registry answering a cosign tag or a referrers listing with
// 100 MiB would hold a worker and its memory that long.
const MaxManifestBytes = 4 << 20

// boundManifest refuses a manifest or referrers answer that says it is
// larger than MaxManifestBytes, without reading it, and makes the body of
// one that does not say fail once it has given MaxManifestBytes.
func boundManifest(req *http.Request, resp *http.Response) error {
	if req.Method != http.MethodGet || !strings.Contains(req.URL.Path, "/manifests/") && !strings.Contains(req.URL.Path, "/referrers/") {
		return nil
	}
	what := req.URL.Redacted()
	if resp.ContentLength > MaxManifestBytes {
		_ = resp.Body.Close()
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrManifestTooLarge, what, resp.ContentLength, MaxManifestBytes)
	}
	resp.Body = &manifestBody{ReadCloser: resp.Body, left: MaxManifestBytes, what: what}
	return nil
}

// manifestBody fails a manifest's body once it has given
// MaxManifestBytes and has more.
type manifestBody struct {
	io.ReadCloser
	left int64
	what string
}

func (b *manifestBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a manifest of exactly the bound from a
		// larger one.
		var one [1]byte
		if n, _ := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("%w: %s is more than %d bytes", ErrManifestTooLarge, b.what, MaxManifestBytes)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
