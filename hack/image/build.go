package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user, as config/manager/manager.yaml runs it.
const (
	uid = 65532
	// sbomType is the media type of the SBOM referrers.
	sbomType types.MediaType = "application/spdx+json"
)

// options are the command's flags.
type options struct {
	version, output, push, source string
	platforms                     []string
}

// platformImage is the image of one platform and its SBOM.
type platformImage struct {
	platform v1.Platform
	image    v1.Image
	// sbom is the SPDX document of the image's binary.
	sbom []byte
}

// built is what one build makes: the index of the platforms' images, and
// each image with its SBOM.
type built struct {
	index  v1.ImageIndex
	images []platformImage
}

// run builds the images and writes or pushes them.
func (o options) run() error {
	if o.version == "" {
		return errors.New("--version is required")
	}
	if o.output == "" && o.push == "" {
		return errors.New("give --output, --push or both")
	}
	created, err := sourceDate(o.source)
	if err != nil {
		return err
	}
	b, err := build(o.source, o.version, o.platforms, created)
	if err != nil {
		return err
	}
	if o.output != "" {
		if err := b.writeLayout(o.output); err != nil {
			return err
		}
	}
	if o.push != "" {
		return b.pushTo(o.push)
	}
	return nil
}

// sourceDate is the time the image's files and creation are stamped
// with: SOURCE_DATE_EPOCH when set, else the time of the source's HEAD
// commit.
func sourceDate(source string) (time.Time, error) {
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		out, err := exec.Command("git", "-C", source, "log", "-1", "--format=%ct").Output()
		if err != nil {
			return time.Time{}, fmt.Errorf("reading the time of the source's commit (set SOURCE_DATE_EPOCH outside a Git checkout): %w", err)
		}
		epoch = strings.TrimSpace(string(out))
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	return time.Unix(secs, 0).UTC(), nil
}

// build builds the image of each platform and their index.
func build(source, version string, platforms []string, created time.Time) (*built, error) {
	revision, err := exec.Command("git", "-C", source, "rev-parse", "HEAD").Output()
	if err != nil {
		return nil, fmt.Errorf("reading the source's commit: %w", err)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":    "uprev",
		"org.opencontainers.image.source":   "https://github.com/uprev-dev/uprev",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": strings.TrimSpace(string(revision)),
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  created.Format(time.RFC3339),
	}
	b := &built{index: mutate.IndexMediaType(empty.Index, types.OCIImageIndex)}
	for _, p := range platforms {
		platform, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, err
		}
		binary, err := compile(source, version, *platform)
		if err != nil {
			return nil, err
		}
		img, err := imageOf(binary, *platform, created, labels)
		if err != nil {
			return nil, err
		}
		doc, err := sbom(binary, version, p, created)
		if err != nil {
			return nil, err
		}
		b.images = append(b.images, platformImage{platform: *platform, image: img, sbom: doc})
		b.index = mutate.AppendManifests(b.index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: platform}})
	}
	return b, nil
}

// compile builds the static manager binary for platform and returns it.
func compile(source, version string, platform v1.Platform) ([]byte, error) {
	dir, err := os.MkdirTemp("", "uprev-image-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	out := filepath.Join(dir, "uprev")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X github.com/uprev-dev/uprev/internal/version.stamped="+version, "-o", out, ".")
	cmd.Dir = source
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+platform.OS, "GOARCH="+platform.Architecture, "GOFLAGS=-buildvcs=false")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build for %s: %w\n%s", platform, err, msg)
	}
	return os.ReadFile(out)
}

// imageOf returns the image of binary: one layer holding /uprev, the
// user and group files that name 65532, and /tmp; every file stamped
// with created and owned by root, so that the same binary gives the same
// layer.
func imageOf(binary []byte, platform v1.Platform, created time.Time, labels map[string]string) (v1.Image, error) {
	files, err := rootFS(binary, created)
	if err != nil {
		return nil, err
	}
	// The layer is compressed once and kept: its digest, the image's and
	// the push each read it.
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(files)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = platform.OS, platform.Architecture, platform.Variant
	cfg.Created = v1.Time{Time: created}
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint: []string{"/uprev", "run"},
		WorkingDir: "/",
		Labels:     labels,
	}
	cfg.History = []v1.History{{Created: v1.Time{Time: created}, CreatedBy: "uprev hack/image", Comment: "the uprev manager, static"}}
	return mutate.ConfigFile(img, cfg)
}

// rootFS returns the tar of the image's files.
func rootFS(binary []byte, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name string
		mode int64
		data []byte
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid))},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid))},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "uprev", mode: 0o755, data: binary},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: created, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sbomArtifact returns the OCI 1.1 artifact that carries doc as a
// referrer of the image subject. Its config's media type is the SBOM's,
// which registries without an artifactType field report as the
// referrer's type (as cosign's bundles do).
func sbomArtifact(doc []byte, subject v1.Image) (v1.Image, error) {
	digest, err := subject.Digest()
	if err != nil {
		return nil, err
	}
	size, err := subject.Size()
	if err != nil {
		return nil, err
	}
	mt, err := subject.MediaType()
	if err != nil {
		return nil, err
	}
	art := mutate.MediaType(mutate.ConfigMediaType(empty.Image, sbomType), types.OCIManifestSchema1)
	art, err = mutate.Append(art, mutate.Addendum{Layer: static.NewLayer(doc, sbomType), MediaType: sbomType})
	if err != nil {
		return nil, err
	}
	return mutate.Subject(art, v1.Descriptor{MediaType: mt, Digest: digest, Size: size}).(v1.Image), nil
}
