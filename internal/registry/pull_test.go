package registry

import (
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"

	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// digestOf returns the digest of img as a string, failing the test on error.
func digestOf(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatalf("computing a digest: %v", err)
	}
	return d.String()
}

func TestArtifactIsReadByDigestNotByTag(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	first, err := random.Image(256, 2)
	g.Expect(err).NotTo(HaveOccurred())
	digest := r.Push(t, "acme/agent", "1.4.2", first)
	// The tag moves to another image after the policy looked it up.
	second, err := random.Image(256, 2)
	g.Expect(err).NotTo(HaveOccurred())
	r.Push(t, "acme/agent", "1.4.2", second)

	c := newClient(t, ScannerOptions{}, Access{})
	r.ResetCounts()
	img, err := c.artifact(t.Context(), r.Image("acme/agent"), digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(digestOf(t, img)).To(Equal(digest))
	layers, err := img.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layers).To(HaveLen(2))
	// One ping and one GET of the manifest, by digest; layers are fetched
	// when read.
	g.Expect(r.Counts()).To(Equal(testregistry.Counts{Total: 2, Ping: 1, ManifestGet: 1}))
}

func TestArtifactResolvesAnIndexToAPlatform(t *testing.T) {
	r := testregistry.Start(t)
	images := map[string]v1.Image{}
	var adds []mutate.IndexAddendum
	for _, p := range []v1.Platform{
		{OS: "linux", Architecture: "arm64"},
		{OS: "linux", Architecture: "amd64"},
		{OS: "linux", Architecture: "arm", Variant: "v7"},
	} {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		images[p.String()] = img
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	index := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	digest := r.PushIndex(t, "acme/agent", "1.4.2", index)
	c := newClient(t, ScannerOptions{}, Access{})

	for _, tc := range []struct{ platform, want string }{
		{"", "linux/amd64"},
		{"linux/arm64", "linux/arm64"},
		{"linux/arm/v7", "linux/arm/v7"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			g := NewWithT(t)
			img, err := c.artifact(t.Context(), r.Image("acme/agent"), digest, WithPlatform(tc.platform))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(digestOf(t, img)).To(Equal(digestOf(t, images[tc.want])))
		})
	}

	t.Run("platform not in the index", func(t *testing.T) {
		g := NewWithT(t)
		_, err := c.artifact(t.Context(), r.Image("acme/agent"), digest, WithPlatform("linux/s390x"))
		g.Expect(err).To(MatchError(ErrNotFound))
		g.Expect(err.Error()).To(ContainSubstring("no image for platform linux/s390x"))
	})
	t.Run("invalid platform", func(t *testing.T) {
		g := NewWithT(t)
		for _, p := range []string{"linux", "linux/", "linux/arm/v7/extra", "/amd64"} {
			_, err := c.artifact(t.Context(), r.Image("acme/agent"), digest, WithPlatform(p))
			g.Expect(err).To(MatchError(ErrInvalidConfig), p)
		}
	})
}

func TestArtifactUsesTheClientCredentials(t *testing.T) {
	r := testregistry.Start(t, testregistry.WithBasicAuth("bot", "s3cret-pa55"))
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	digest := r.Push(t, "private/agent", "1.0.0", img)

	t.Run("good credentials", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, ScannerOptions{}, Access{PullSecrets: []map[string][]byte{dockerConfig(r, "bot", "s3cret-pa55")}})
		got, err := c.artifact(t.Context(), r.Image("private/agent"), digest)
		g.Expect(err).NotTo(HaveOccurred())
		layers, err := got.Layers()
		g.Expect(err).NotTo(HaveOccurred())
		rc, err := layers[0].Compressed()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rc.Close()).To(Succeed())
	})
	t.Run("no credentials", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, ScannerOptions{}, Access{})
		_, err := c.artifact(t.Context(), r.Image("private/agent"), digest)
		g.Expect(err).To(MatchError(ErrUnauthorized))
	})
}

func TestArtifactErrors(t *testing.T) {
	r := testregistry.Start(t)
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Push(t, "acme/agent", "1.0.0", img)
	c := newClient(t, ScannerOptions{}, Access{})
	missing := "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

	for name, tc := range map[string]struct {
		image, digest string
		want          error
	}{
		"unknown digest":      {r.Image("acme/agent"), missing, ErrNotFound},
		"unknown repository":  {r.Image("acme/missing"), missing, ErrNotFound},
		"a tag, not a digest": {r.Image("acme/agent"), "1.0.0", ErrInvalidConfig},
		"short digest":        {r.Image("acme/agent"), "sha256:0123", ErrInvalidConfig},
		"image with a tag":    {r.Image("acme/agent") + ":1.0.0", missing, ErrInvalidConfig},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := c.artifact(t.Context(), tc.image, tc.digest)
			g.Expect(err).To(MatchError(tc.want))
		})
	}
}
