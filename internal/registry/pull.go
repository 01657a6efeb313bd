package registry

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DefaultPlatform is the platform an image index is resolved to when the
// caller names none.
const DefaultPlatform = "linux/amd64"

// ArtifactOption changes how Client.Artifact reads an artifact.
type ArtifactOption func(*artifactOptions)

type artifactOptions struct {
	platform string
}

// WithPlatform makes Client.Artifact resolve an image index to the manifest
// of platform, given as os/arch or os/arch/variant (linux/arm64,
// linux/arm/v7). An empty platform means DefaultPlatform. The option has no
// effect on an artifact that is not an index.
func WithPlatform(platform string) ArtifactOption {
	return func(o *artifactOptions) {
		o.platform = platform
	}
}

// ReadArtifact fetches the image, Helm chart or OCI artifact stored in
// image at digest (see artifact) and calls read with it; the whole of it,
// manifest and the layers read, is bounded by the Access timeout.
func (c *Client) ReadArtifact(ctx context.Context, image, digest string, read func(v1.Image) error, opts ...ArtifactOption) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	img, err := c.artifact(ctx, image, digest, opts...)
	if err != nil {
		return err
	}
	if err := read(img); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("reading %s@%s: %w: %w", image, digest, ErrTransient, err)
		}
		return err
	}
	return nil
}

// artifact returns the image, Helm chart or OCI artifact stored in image
// (a repository name without tag or digest, as in spec.image) at digest,
// with the Client's credentials, TLS and proxy settings. It is always read
// by digest, never by a tag that may have moved since the digest was
// looked up, and what the registry sends is checked against the digest. An
// image index (a multi-arch image) is resolved to the manifest of
// DefaultPlatform, or of the platform given with WithPlatform; its child is
// named by digest in the index, so the whole chain stays verified.
//
// Only the manifest is fetched here. The layers are fetched, and checked
// against their digests, when they are read, with ctx: it must stay alive
// until the caller is done with the image.
//
// Errors wrap ErrNotFound, ErrUnauthorized or ErrTransient where one
// applies, and ErrInvalidConfig for a bad image name, digest or platform.
func (c *Client) artifact(ctx context.Context, image, digest string, opts ...ArtifactOption) (v1.Image, error) {
	var o artifactOptions
	for _, opt := range opts {
		opt(&o)
	}
	platform, err := parsePlatform(o.platform)
	if err != nil {
		return nil, err
	}
	repo, err := parseRepository(image, c.insecure)
	if err != nil {
		return nil, err
	}
	hash, err := v1.NewHash(digest)
	if err != nil {
		return nil, fmt.Errorf("%w: digest %q of %s: %w", ErrInvalidConfig, digest, image, err)
	}
	ref := repo.Digest(hash.String())
	desc, err := c.puller.Get(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("fetching the manifest of %s: %w", ref, classify(err))
	}
	if !desc.MediaType.IsIndex() {
		img, err := desc.Image()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", ref, classify(err))
		}
		return img, nil
	}
	index, err := desc.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading the index %s: %w", ref, classify(err))
	}
	return imageForPlatform(index, ref, platform)
}

// imageForPlatform returns the image of index, which ref names, that runs
// on platform, going down nested indexes.
func imageForPlatform(index v1.ImageIndex, ref name.Digest, platform v1.Platform) (v1.Image, error) {
	manifest, err := index.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading the index %s: %w", ref, classify(err))
	}
	for _, child := range manifest.Manifests {
		p := v1.Platform{OS: "linux", Architecture: "amd64"}
		if child.Platform != nil {
			p = *child.Platform
		}
		if !p.Satisfies(platform) {
			continue
		}
		switch {
		case child.MediaType.IsImage():
			img, err := index.Image(child.Digest)
			if err != nil {
				return nil, fmt.Errorf("reading the %s image %s of %s: %w", platform, child.Digest, ref, classify(err))
			}
			return img, nil
		case child.MediaType.IsIndex():
			nested, err := index.ImageIndex(child.Digest)
			if err != nil {
				return nil, fmt.Errorf("reading the index %s of %s: %w", child.Digest, ref, classify(err))
			}
			return imageForPlatform(nested, ref.Context().Digest(child.Digest.String()), platform)
		}
	}
	return nil, fmt.Errorf("%w: the index %s has no image for platform %s", ErrNotFound, ref, platform)
}

// parsePlatform parses os/arch[/variant], defaulting to DefaultPlatform.
func parsePlatform(s string) (v1.Platform, error) {
	if s == "" {
		s = DefaultPlatform
	}
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return v1.Platform{}, fmt.Errorf("%w: platform %q: want os/arch or os/arch/variant, such as linux/arm64", ErrInvalidConfig, s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}
