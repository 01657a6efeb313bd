package source

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"text/template"
)

// Bounds of asset downloads.
const (
	// DefaultMaxAssetBytes bounds one asset: 1 GiB, room for the largest
	// Kubernetes node binaries.
	DefaultMaxAssetBytes = 1 << 30
	// maxChecksumBytes bounds a checksum file: room for sha256sum's lines
	// of thousands of files.
	maxChecksumBytes = 1 << 20
)

// ErrChecksumMismatch is wrapped by a *ChecksumMismatchError.
var ErrChecksumMismatch = errors.New("checksum mismatch")

// ChecksumMismatchError means an asset's content does not have the hash
// its published checksum file names.
type ChecksumMismatchError struct {
	// Asset is the asset's name; URL where it was downloaded from.
	Asset, URL string
	// Published is the hash the checksum file names, Computed the hash of
	// what was downloaded, both sha256:<hex>.
	Published, Computed string
}

// Error names the asset and both hashes.
func (e *ChecksumMismatchError) Error() string {
	return fmt.Sprintf("asset %s (%s) has %s, but its checksum file publishes %s", e.Asset, RedactURL(e.URL), e.Computed, e.Published)
}

// Unwrap returns ErrChecksumMismatch.
func (e *ChecksumMismatchError) Unwrap() error { return ErrChecksumMismatch }

// AssetSpec is one file of a release to pin.
type AssetSpec struct {
	// Name names the asset.
	Name string
	// URL is a Go template of the version ({{.Version}}).
	URL string
	// ChecksumURL, when set, is a Go template of the version too, of the
	// published checksum file.
	ChecksumURL string
}

// Asset is a pinned asset.
type Asset struct {
	// Name names the asset.
	Name string
	// URL is where it was downloaded from (its template expanded).
	URL string
	// SHA256 is the hash of its content, as sha256:<hex>.
	SHA256 string
}

// AssetURL expands an asset or checksum URL template for version. The
// error wraps ErrInvalidConfig.
func AssetURL(tmpl, version string) (string, error) {
	t, err := template.New("url").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", fmt.Errorf("%w: URL template %q: %w", ErrInvalidConfig, tmpl, err)
	}
	var b strings.Builder
	if err := t.Execute(&b, struct{ Version string }{version}); err != nil {
		return "", fmt.Errorf("%w: URL template %q: %w", ErrInvalidConfig, tmpl, err)
	}
	u, err := url.Parse(b.String())
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("%w: URL template %q gives %q, not an http(s) URL", ErrInvalidConfig, tmpl, RedactURL(b.String()))
	}
	return u.String(), nil
}

// PinAssets downloads each asset of version once, computes its SHA-256
// while it streams (at most Options.MaxAssetBytes, nothing kept in memory
// or on disk), and compares it with the published checksum when the asset
// has a checksum file. Credentials of access go only to sourceURL's host
// (none when it is not an http(s) URL, such as a Git remote over SSH);
// redirects of asset downloads may go to other hosts (release downloads are
// served from CDNs), over HTTPS when they started so, never carrying the
// credentials. A mismatch is a *ChecksumMismatchError.
func (c *Client) PinAssets(ctx context.Context, access Access, sourceURL, version string, specs []AssetSpec) ([]Asset, error) {
	ctx, cancel := access.withTimeout(ctx)
	defer cancel()
	var host string
	if u, err := url.Parse(sourceURL); err == nil && (u.Scheme == "https" || u.Scheme == "http") {
		host = u.Host
	} else {
		access.Secret = nil
	}
	s, err := c.sessionOn("", host, access)
	if err != nil {
		return nil, err
	}
	s.http.CheckRedirect = s.checkAssetRedirect
	assets := make([]Asset, 0, len(specs))
	for _, spec := range specs {
		a, err := s.pinAsset(ctx, version, spec)
		if err != nil {
			return nil, fmt.Errorf("pinning asset %s of version %s: %w", spec.Name, version, err)
		}
		assets = append(assets, a)
	}
	return assets, nil
}

// checkAssetRedirect follows up to maxRedirects redirects, never from
// https to http, and drops the credentials on a redirect off the source's
// host: net/http keeps them for another port of the same host name.
func (s *session) checkAssetRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Host != s.host {
		req.Header.Del("Authorization")
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrInvalidResponse, maxRedirects)
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: %s redirects to http://%s", ErrInvalidResponse, via[len(via)-1].URL.Host, req.URL.Host)
	}
	return nil
}

// pinAsset downloads and hashes one asset, and checks its checksum.
func (s *session) pinAsset(ctx context.Context, version string, spec AssetSpec) (Asset, error) {
	assetURL, err := AssetURL(spec.URL, version)
	if err != nil {
		return Asset{}, err
	}
	var published string
	if spec.ChecksumURL != "" {
		sumURL, err := AssetURL(spec.ChecksumURL, version)
		if err != nil {
			return Asset{}, err
		}
		if published, err = s.publishedChecksum(ctx, sumURL, assetURL); err != nil {
			return Asset{}, err
		}
	}
	computed, err := s.download(ctx, assetURL, s.c.opts.MaxAssetBytes, func(body io.Reader) (string, error) {
		h := sha256.New()
		if _, err := io.Copy(h, body); err != nil {
			return "", err
		}
		return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
	})
	if err != nil {
		return Asset{}, err
	}
	if published != "" && published != computed {
		return Asset{}, &ChecksumMismatchError{Asset: spec.Name, URL: assetURL, Published: published, Computed: computed}
	}
	return Asset{Name: spec.Name, URL: assetURL, SHA256: computed}, nil
}

// publishedChecksum reads a checksum file: a bare SHA-256 in hex, or
// sha256sum's lines, of which the one naming assetURL's file.
func (s *session) publishedChecksum(ctx context.Context, sumURL, assetURL string) (string, error) {
	file := path.Base(mustPath(assetURL))
	return s.download(ctx, sumURL, maxChecksumBytes, func(body io.Reader) (string, error) {
		content, err := io.ReadAll(body)
		if err != nil {
			return "", err
		}
		return parseChecksumFile(content, file)
	})
}

// parseChecksumFile returns the SHA-256 a checksum file names for file, as
// sha256:<hex>.
func parseChecksumFile(content []byte, file string) (string, error) {
	var only string
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(content))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		lines++
		sum := strings.ToLower(fields[0])
		if len(sum) != sha256.Size*2 || strings.Trim(sum, "0123456789abcdef") != "" {
			continue
		}
		if len(fields) == 1 {
			only = sum
			continue
		}
		if strings.TrimPrefix(path.Base(fields[len(fields)-1]), "*") == file {
			return "sha256:" + sum, nil
		}
	}
	if only != "" && lines == 1 {
		return "sha256:" + only, nil
	}
	return "", fmt.Errorf("%w: the checksum file names no SHA-256 for %s", ErrInvalidResponse, file)
}

// mustPath returns the path of a URL that AssetURL made.
func mustPath(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return u.Path
}

// download GETs rawURL and gives its body, bounded by limit, to read.
// Credentials go with the request only when rawURL is on the source's
// host.
func (s *session) download(ctx context.Context, rawURL string, limit int64, read func(io.Reader) (string, error)) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	req.Header.Set("User-Agent", s.c.opts.UserAgent)
	if s.host != "" && req.URL.Host == s.host {
		s.authorize(req)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return "", s.requestError(ctx, rawURL, err)
	}
	defer func() { _ = resp.Body.Close() }() // read only
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w: GET %s: HTTP %d%s", ErrUnreachable, RedactURL(rawURL), resp.StatusCode, errorText(resp.Body))
	}
	if resp.ContentLength > limit {
		return "", fmt.Errorf("%w: %s is %d bytes, more than the bound of %d", ErrInvalidResponse, RedactURL(rawURL), resp.ContentLength, limit)
	}
	counted := &countingReader{r: io.LimitReader(resp.Body, limit+1)}
	value, err := read(counted)
	switch {
	case counted.n > limit:
		return "", fmt.Errorf("%w: %s is more than the bound of %d bytes", ErrInvalidResponse, RedactURL(rawURL), limit)
	case err != nil && ctx.Err() != nil:
		return "", s.requestError(ctx, rawURL, err)
	case err != nil:
		return "", fmt.Errorf("reading %s: %w", RedactURL(rawURL), err)
	}
	return value, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
