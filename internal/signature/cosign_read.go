package signature

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/uprev-dev/uprev/internal/registry"
)

// simpleSigning is the part of a cosign 2 payload that says what it signs.
type simpleSigning struct {
	Critical struct {
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
	} `json:"critical"`
}

// tagSignatures reads the signatures of the cosign 2 layout: the layers of
// the manifest at SignatureTag(digest). Layers whose payload names another
// digest are left out: a signature copied from another image signs that
// image, not this one.
func tagSignatures(ctx context.Context, reg Registry, image string, digest v1.Hash) ([]signedEntity, error) {
	tag := SignatureTag(digest.String())
	keep := func(layer v1.Descriptor) bool {
		return layer.MediaType == SimpleSigningMediaType && layer.Annotations[SignatureAnnotation] != ""
	}
	out, err := tagLayers(ctx, reg, image, tag, keep, nil, func(i int, layer v1.Descriptor, payload []byte) (signedEntity, bool) {
		var claim simpleSigning
		if json.Unmarshal(payload, &claim) != nil || claim.Critical.Image.DockerManifestDigest != digest.String() {
			return signedEntity{}, false
		}
		entity, keyless, err := newTagEntity(payload, layer.Annotations)
		if err != nil {
			// A signature that does not parse verifies nothing.
			return signedEntity{}, false
		}
		return signedEntity{
			entity:   entity,
			artifact: func() verify.ArtifactPolicyOption { return verify.WithArtifact(bytes.NewReader(payload)) },
			keyless:  keyless,
			where:    fmt.Sprintf("signature %d at tag %s", i, tag),
		}, true
	})
	if err != nil {
		return nil, fmt.Errorf("reading the cosign signatures of %s@%s: %w", image, digest, err)
	}
	return out, nil
}

// tagLayers reads the manifest at tag of image (cosign 2's layouts) and
// gives each of its first MaxSignatures layers that keep accepts, with its
// content, to entity; it returns the entities entity made. A layer over
// MaxSignatureBytes goes to large when it is not nil. A tag that does not
// exist holds none, and so does a manifest over MaxSignatureBytes.
func tagLayers(ctx context.Context, reg Registry, image, tag string, keep func(v1.Descriptor) bool, large largeLayer,
	entity func(i int, layer v1.Descriptor, data []byte) (signedEntity, bool)) ([]signedEntity, error) {
	var out []signedEntity
	err := reg.ReadTagged(ctx, image, tag, func(img v1.Image) error {
		raw, err := img.RawManifest()
		if err != nil {
			return err
		}
		if len(raw) > MaxSignatureBytes {
			// Thousands of layers: go-containerregistry parses the
			// manifest again for each layer read, so none is read, as a
			// payload over the bound is not.
			return nil
		}
		manifest, err := img.Manifest()
		if err != nil {
			return err
		}
		for i, layer := range manifest.Layers {
			if i == MaxSignatures {
				break
			}
			if !keep(layer) {
				continue
			}
			if layer.Size > MaxSignatureBytes && large != nil {
				if err := large(img, layer, fmt.Sprintf("layer %d at tag %s", i, tag)); err != nil {
					return err
				}
				continue
			}
			data, err := readBlob(img, layer)
			if err != nil {
				return fmt.Errorf("reading layer %s: %w", layer.Digest, err)
			}
			if e, ok := entity(i, layer, data); ok {
				out = append(out, e)
			}
		}
		return nil
	})
	if errors.Is(err, registry.ErrNotFound) {
		return nil, nil
	}
	return out, err
}

// largeLayer judges a layer of img over MaxSignatureBytes, which where
// names for a person; its error ends the read.
type largeLayer func(img v1.Image, layer v1.Descriptor, where string) error

// referrerBundles reads the signatures of the cosign 3 layout: the
// Sigstore bundles among the referrers of digest whose statement names
// digest. A bundle over MaxSignatureBytes goes to large, or is skipped
// when large is nil.
func referrerBundles(ctx context.Context, reg Registry, image string, digest v1.Hash, large largeLayer) ([]signedEntity, error) {
	descs, err := reg.Referrers(ctx, image, digest.String(), BundleArtifactType)
	if err != nil {
		return nil, fmt.Errorf("reading the signature bundles of %s@%s: %w", image, digest, err)
	}
	artifact, err := namesDigest(digest)
	if err != nil {
		return nil, err
	}
	var out []signedEntity
	for i, desc := range descs {
		if i == MaxSignatures {
			break
		}
		var b *bundle.Bundle
		err := reg.ReadArtifact(ctx, image, desc.Digest.String(), func(img v1.Image) error {
			manifest, err := img.Manifest()
			if err != nil {
				return err
			}
			for _, layer := range manifest.Layers {
				if layer.MediaType != BundleArtifactType {
					continue
				}
				if layer.Size > MaxSignatureBytes {
					if large != nil {
						return large(img, layer, fmt.Sprintf("bundle %s", desc.Digest))
					}
					// Too large to be read: as a bundle that does not
					// parse, it verifies nothing, and others are read.
					return nil
				}
				data, err := readBlob(img, layer)
				if err != nil {
					return fmt.Errorf("reading layer %s: %w", layer.Digest, err)
				}
				b = &bundle.Bundle{}
				if b.UnmarshalJSON(data) != nil {
					// A bundle that does not parse verifies nothing.
					b = nil
				}
				return nil
			}
			return nil
		})
		switch {
		case errors.Is(err, registry.ErrNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading the signature bundle %s of %s@%s: %w", desc.Digest, image, digest, err)
		case b == nil:
			continue
		}
		if !statementNames(b, digest) {
			continue
		}
		vc, err := b.VerificationContent()
		if err != nil {
			continue
		}
		out = append(out, signedEntity{
			entity:   b,
			artifact: artifact,
			keyless:  vc.Certificate() != nil,
			where:    fmt.Sprintf("bundle %s", desc.Digest),
		})
	}
	return out, nil
}

// statementNames tells whether the in-toto statement of a DSSE bundle
// names digest among its subjects: a bundle copied to another image's
// referrers signs that other image, and counts as no signature here. A
// bundle with a message signature is judged by verification alone.
func statementNames(b *bundle.Bundle, digest v1.Hash) bool {
	if _, ok := b.Content.(*protobundle.Bundle_DsseEnvelope); !ok {
		return true
	}
	env, err := b.Envelope()
	if err != nil {
		return false
	}
	st, err := env.Statement()
	return err == nil && statementSubjects(st, digest)
}

// statementSubjects tells whether st names digest among its subjects.
func statementSubjects(st *intoto.Statement, digest v1.Hash) bool {
	for _, subject := range st.GetSubject() {
		if subject.GetDigest()[digest.Algorithm] == digest.Hex {
			return true
		}
	}
	return false
}

// readBlob reads the blob of layer from img, at most MaxSignatureBytes.
func readBlob(img v1.Image, layer v1.Descriptor) ([]byte, error) {
	if layer.Size > MaxSignatureBytes {
		return nil, fmt.Errorf("%d bytes, more than %d", layer.Size, MaxSignatureBytes)
	}
	l, err := img.LayerByDigest(layer.Digest)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }() // read only
	data, err := io.ReadAll(io.LimitReader(rc, MaxSignatureBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSignatureBytes {
		return nil, fmt.Errorf("more than %d bytes", MaxSignatureBytes)
	}
	return data, nil
}
