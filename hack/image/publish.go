package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// writeLayout writes the index into an OCI image layout at dir, the SBOM
// artifacts beside it, and each SBOM as sbom-<os>-<arch>.spdx.json in dir
// too, for `cosign attest --predicate`.
func (b *built) writeLayout(dir string) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(b.index); err != nil {
		return err
	}
	for _, pi := range b.images {
		art, err := sbomArtifact(pi.sbom, pi.image)
		if err != nil {
			return err
		}
		if err := p.AppendImage(art); err != nil {
			return err
		}
		file := filepath.Join(dir, "sbom-"+strings.ReplaceAll(pi.platform.String(), "/", "-")+".spdx.json")
		if err := os.WriteFile(file, pi.sbom, 0o644); err != nil {
			return err
		}
	}
	digest, err := b.index.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s: the image index %s\n", dir, digest)
	return nil
}

// pushTo pushes the index to ref, and each SBOM as a referrer of its
// image, with the credentials of the Docker config. It prints the index's
// digest reference, then one line per platform: the platform and its
// image's digest reference, which the release workflow signs and attests.
func (b *built) pushTo(ref string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	if err := remote.WriteIndex(r, b.index, auth); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	for _, pi := range b.images {
		art, err := sbomArtifact(pi.sbom, pi.image)
		if err != nil {
			return err
		}
		digest, err := art.Digest()
		if err != nil {
			return err
		}
		if err := remote.Write(r.Context().Digest(digest.String()), art, auth); err != nil {
			return fmt.Errorf("pushing the SBOM of %s: %w", pi.platform, err)
		}
	}
	digest, err := b.index.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", r.Context(), digest)
	for _, pi := range b.images {
		d, err := pi.image.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s %s@%s\n", pi.platform, r.Context(), d)
	}
	return nil
}
