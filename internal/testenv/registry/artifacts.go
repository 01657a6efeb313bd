package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Push pushes img, which the test built (a container image, a Helm chart or
// any OCI artifact), as repo:tag and returns its digest.
func (r *Registry) Push(t testing.TB, repo, tag string, img v1.Image) string {
	t.Helper()
	ref := r.tag(t, repo, tag)
	if err := remote.Write(ref, img, remote.WithTransport(handlerTransport{r})); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatalf("computing the digest of %s: %v", ref, err)
	}
	return digest.String()
}

// PushIndex pushes index, a multi-arch image the test built, with all its
// images, as repo:tag and returns the digest of the index.
func (r *Registry) PushIndex(t testing.TB, repo, tag string, index v1.ImageIndex) string {
	t.Helper()
	ref := r.tag(t, repo, tag)
	if err := remote.WriteIndex(ref, index, remote.WithTransport(handlerTransport{r})); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	digest, err := index.Digest()
	if err != nil {
		t.Fatalf("computing the digest of %s: %v", ref, err)
	}
	return digest.String()
}

func (r *Registry) tag(t testing.TB, repo, tag string) name.Tag {
	t.Helper()
	ref, err := name.NewTag(r.Image(repo)+":"+tag, name.Insecure)
	if err != nil {
		t.Fatalf("parsing image name: %v", err)
	}
	return ref
}

// PushReferrer pushes img, an artifact the test built whose manifest names
// a subject (a signature bundle), by its digest, without a tag, as the
// OCI referrers layout does, and returns that digest.
func (r *Registry) PushReferrer(t testing.TB, repo string, img v1.Image) string {
	t.Helper()
	digest, err := img.Digest()
	if err != nil {
		t.Fatalf("computing the digest of a referrer of %s: %v", repo, err)
	}
	ref, err := name.NewDigest(r.Image(repo)+"@"+digest.String(), name.Insecure)
	if err != nil {
		t.Fatalf("parsing image name: %v", err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(handlerTransport{r})); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	return digest.String()
}

// Get reads the manifest repo:reference (a tag or a digest) straight from
// the registry handler, as the push helpers write, without counting.
func (r *Registry) Get(repo, reference string) (*remote.Descriptor, error) {
	ref, err := name.ParseReference(r.Image(repo)+sep(reference)+reference, name.Insecure)
	if err != nil {
		return nil, fmt.Errorf("parsing image name: %w", err)
	}
	return remote.Get(ref, remote.WithTransport(handlerTransport{r}))
}

// sep is what goes between a repository and reference: @ before a digest.
func sep(reference string) string {
	if strings.Contains(reference, ":") {
		return "@"
	}
	return ":"
}

// rawManifest is a manifest as bytes, for remote.Put.
type rawManifest struct {
	data      []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.data, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }

// PushManifest puts manifest as repo:tag (by its digest alone when tag is
// empty), as it is: the blobs it names are not pushed, and its sizes are
// not checked, as a hostile registry would serve it. It returns the
// manifest's digest.
func (r *Registry) PushManifest(t testing.TB, repo, tag string, manifest *v1.Manifest) string {
	t.Helper()
	data, err := json.Marshal(manifest)
	if err != nil {
		t.Fatalf("encoding a manifest: %v", err)
	}
	digest, _, err := v1.SHA256(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.Image(repo)+"@"+digest.String(), name.Insecure)
	if tag != "" {
		ref, err = name.NewTag(r.Image(repo)+":"+tag, name.Insecure)
	}
	if err != nil {
		t.Fatalf("parsing image name: %v", err)
	}
	defer r.forgetTags()
	if err := remote.Put(ref, rawManifest{data: data, mediaType: manifest.MediaType}, remote.WithTransport(handlerTransport{r})); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	return digest.String()
}
