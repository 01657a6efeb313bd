package registry

import (
	"context"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ReadTagged fetches the image manifest that tag of image names (with
// the Client's credentials, TLS and proxy settings) and calls read with
// it; manifest and the layers read are bounded by the Access timeout, and
// each layer is checked against its digest when read. It serves what is
// looked up by a name derived from a digest, such as the
// sha256-<hex>.sig tag where cosign 2 stores an image's signatures: the
// caller judges what it reads, as a tag may move. A missing tag wraps
// ErrNotFound.
func (c *Client) ReadTagged(ctx context.Context, image, tag string, read func(v1.Image) error) error {
	repo, err := parseRepository(image, c.insecure)
	if err != nil {
		return err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	ref := repo.Tag(tag)
	desc, err := c.puller.Get(ctx, ref)
	if err != nil {
		return fmt.Errorf("fetching the manifest of %s: %w", ref, classify(err))
	}
	img, err := desc.Image()
	if err != nil {
		return fmt.Errorf("reading %s: %w", ref, classify(err))
	}
	if err := read(img); err != nil {
		return fmt.Errorf("reading %s: %w", ref, classify(err))
	}
	return nil
}

// Referrers returns the descriptors of the manifests that refer to
// image@digest (OCI 1.1 subject), through the registry's referrers API or
// its tag fallback, keeping only those of artifactType when it is set. A
// registry with none answers an empty list.
func (c *Client) Referrers(ctx context.Context, image, digest, artifactType string) ([]v1.Descriptor, error) {
	repo, err := parseRepository(image, c.insecure)
	if err != nil {
		return nil, err
	}
	hash, err := v1.NewHash(digest)
	if err != nil {
		return nil, fmt.Errorf("%w: digest %q of %s: %w", ErrInvalidConfig, digest, image, err)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	ref := repo.Digest(hash.String())
	opts := []remote.Option{remote.Reuse(c.puller), remote.WithContext(ctx)}
	if artifactType != "" {
		opts = append(opts, remote.WithFilter("artifactType", artifactType))
	}
	index, err := remote.Referrers(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("listing the referrers of %s: %w", ref, classify(err))
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading the referrers of %s: %w", ref, classify(err))
	}
	return manifest.Manifests, nil
}
