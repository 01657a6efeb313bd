package crds

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of the artifacts that Extract knows.
const (
	// ChartConfigMediaType is the config media type of a Helm chart stored
	// in an OCI registry.
	ChartConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	// ChartLayerMediaType is the media type of the layer of a Helm chart
	// holding the chart's tar+gzip archive.
	ChartLayerMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	// FluxContentMediaType is the media type of the tar+gzip layer of a
	// Flux OCI artifact (flux push artifact), the common artifact source.
	FluxContentMediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"
)

// Default limits of Options.
const (
	// DefaultMaxLayerSize is the default Options.MaxLayerSize, 100 MiB.
	DefaultMaxLayerSize = 100 << 20
	// DefaultMaxFiles is the default Options.MaxFiles.
	DefaultMaxFiles = 1000
)

// Source says where the CRDs are in an artifact, as UpdateAutomation
// spec.crds[].from does. Exactly one field is set.
type Source struct {
	// Chart reads the files of the crds/ folder of a Helm chart stored in
	// an OCI registry, including its subfolders, as Helm does. CRDs of
	// subcharts are not read.
	Chart bool
	// ImagePath reads the CRD files under this folder (and its subfolders)
	// of a container image's filesystem, such as /crds.
	ImagePath string
	// ArtifactMediaType reads the first layer of this media type, a tar
	// (normally tar+gzip, such as FluxContentMediaType) of YAML files.
	ArtifactMediaType string
}

// String describes the source for messages, as it is written in YAML.
func (s Source) String() string {
	switch {
	case s.Chart:
		return "chart"
	case s.ImagePath != "":
		return "image path " + s.ImagePath
	case s.ArtifactMediaType != "":
		return "artifact layer " + s.ArtifactMediaType
	}
	return "no source"
}

// Options bound what Extract reads. Zero values take the defaults.
type Options struct {
	// MaxLayerSize is the largest uncompressed size of a layer read, in
	// bytes, and also the largest total of the YAML files kept. Bytes are
	// counted while the layer streams, so a larger layer is refused after
	// reading this much. Default DefaultMaxLayerSize.
	MaxLayerSize int64
	// MaxFiles is the largest number of tar entries in the CRD folder (the
	// whole archive for an artifact source). Default DefaultMaxFiles.
	MaxFiles int
}

// CRD is one CustomResourceDefinition of a Bundle.
type CRD struct {
	// Name is metadata.name, <plural>.<group>.
	Name string
	// Version is the app.kubernetes.io/version label, or empty.
	Version string
	// Manifest is the normalised YAML of the CRD, as written to its file.
	Manifest []byte
	// Source is the file of the artifact the CRD was read from.
	Source string
}

// Bundle is what Extract found in an artifact.
type Bundle struct {
	// CRDs are the apiextensions.k8s.io/v1 CustomResourceDefinitions,
	// sorted by name.
	CRDs []CRD
	// Ignored is the number of other documents, which are left out.
	Ignored int
	// IgnoredKinds counts the ignored documents by "<apiVersion> <kind>"
	// (such as "rbac.authorization.k8s.io/v1 ClusterRoleBinding").
	IgnoredKinds map[string]int
}

// Extract reads the CRDs of img where src says. It reads only what it
// needs: the chart layer, the artifact layer, or every layer of an image
// (topmost first, so that whiteouts of upper layers hide the files of lower
// ones), streaming each and keeping only the YAML files (.yaml, .yml,
// .json) of the CRD folder. Files with other names and symbolic links that
// stay in the folder are skipped.
//
// A problem with the artifact gives an *ArtifactError (see the Err*
// sentinels); a failure to read it, such as a registry error while a layer
// streams or a digest that does not match, is returned wrapped. ctx cancels
// the reading.
func Extract(ctx context.Context, img v1.Image, src Source, opts Options) (*Bundle, error) {
	if opts.MaxLayerSize <= 0 {
		opts.MaxLayerSize = DefaultMaxLayerSize
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	x := &extraction{ctx: ctx, opts: opts, files: map[string][]byte{}}
	var err error
	switch {
	case countSet(src) != 1:
		return nil, fmt.Errorf("%w: exactly one of chart, image or artifact must be given", ErrInvalidSource)
	case src.Chart:
		err = x.readChart(img)
	case src.ImagePath != "":
		err = x.readImage(img, src.ImagePath)
	default:
		err = x.readArtifact(img, src.ArtifactMediaType)
	}
	if err != nil {
		return nil, fmt.Errorf("reading CRDs from the %s: %w", src, err)
	}
	bundle, err := parseFiles(x.files)
	if err != nil {
		return nil, fmt.Errorf("reading CRDs from the %s: %w", src, err)
	}
	return bundle, nil
}

func countSet(src Source) int {
	n := 0
	for _, set := range []bool{src.Chart, src.ImagePath != "", src.ArtifactMediaType != ""} {
		if set {
			n++
		}
	}
	return n
}

// readChart reads the crds/ folder of the chart archive in the chart layer.
func (x *extraction) readChart(img v1.Image) error {
	manifest, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("reading the manifest: %w", err)
	}
	if manifest.Config.MediaType != ChartConfigMediaType {
		return &ArtifactError{Err: fmt.Errorf("%w: not a Helm chart: config media type %q, want %q", ErrWrongArtifact, manifest.Config.MediaType, ChartConfigMediaType)}
	}
	layer, err := layerOfType(img, manifest, ChartLayerMediaType)
	if err != nil {
		return err
	}
	// Helm strips the first element of every path in a chart archive, the
	// chart's folder, whatever it is called.
	return x.readLayer(layer, func(p string, _ bool) (string, bool, bool) {
		top, rest, ok := strings.Cut(p, "/")
		return top + "/crds", ok && within(rest, "crds"), true
	}, false)
}

// readArtifact reads every file of the first layer of mediaType.
func (x *extraction) readArtifact(img v1.Image, mediaType string) error {
	manifest, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("reading the manifest: %w", err)
	}
	layer, err := layerOfType(img, manifest, types.MediaType(mediaType))
	if err != nil {
		return err
	}
	return x.readLayer(layer, wholeArchive, false)
}

// wholeArchive is the entryFilter of an artifact layer: every entry is in
// the CRD folder, which is the whole archive.
func wholeArchive(string, bool) (root string, inFolder, keep bool) { return "", true, true }

// layerOfType returns the first layer of img with media type mediaType.
func layerOfType(img v1.Image, manifest *v1.Manifest, mediaType types.MediaType) (v1.Layer, error) {
	i := slices.IndexFunc(manifest.Layers, func(d v1.Descriptor) bool { return d.MediaType == mediaType })
	if i < 0 {
		return nil, &ArtifactError{Err: fmt.Errorf("%w: no layer of media type %s", ErrWrongArtifact, mediaType)}
	}
	layer, err := img.LayerByDigest(manifest.Layers[i].Digest)
	if err != nil {
		return nil, fmt.Errorf("reading layer %s: %w", manifest.Layers[i].Digest, err)
	}
	return layer, nil
}

// readImage reads the folder dir of the image's filesystem, flattening its
// layers from the top one down: a file seen in an upper layer hides the
// same path in lower ones, and so do its whiteouts (.wh.<name> hides name,
// .wh..wh..opq hides the lower contents of its folder). Only what bears on
// dir is remembered between layers, so memory does not grow with the size
// of the filesystem.
func (x *extraction) readImage(img v1.Image, dir string) error {
	root, err := cleanSourcePath(dir)
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("reading the layers: %w", err)
	}
	fs := &flattener{root: root, seen: map[string]bool{}, removed: map[string]bool{}, opaque: map[string]bool{}}
	for i := len(layers) - 1; i >= 0; i-- {
		fs.beginLayer()
		if err := x.readLayer(layers[i], fs.entry, true); err != nil {
			return err
		}
		fs.endLayer()
	}
	return nil
}

// cleanSourcePath turns an image path (/crds) into a clean path relative to
// the image root (crds); / is the root itself.
func cleanSourcePath(dir string) (string, error) {
	p := strings.TrimPrefix(path.Clean("/"+dir), "/")
	if slices.Contains(strings.Split(dir, "/"), "..") {
		return "", fmt.Errorf("%w: image path %q has a .. element", ErrInvalidSource, dir)
	}
	return p, nil
}

// within reports whether the clean relative path p is root or under it;
// every path is within the root "".
func within(p, root string) bool {
	return root == "" || p == root || strings.HasPrefix(p, root+"/")
}

// flattener tracks, across the layers of an image, what the layers above
// the current one did to the paths that bear on root: the folder itself,
// what is under it, and its parents.
type flattener struct {
	root string
	// seen holds each path an upper layer has, and whether it is a folder.
	seen map[string]bool
	// removed holds the paths upper layers whited out.
	removed map[string]bool
	// opaque holds the folders whose lower contents upper layers hid.
	opaque map[string]bool
	// The whiteouts of the current layer apply to the layers below only.
	layerRemoved, layerOpaque []string
}

func (f *flattener) beginLayer() {
	f.layerRemoved, f.layerOpaque = f.layerRemoved[:0], f.layerOpaque[:0]
}

func (f *flattener) endLayer() {
	for _, p := range f.layerRemoved {
		f.removed[p] = true
	}
	for _, p := range f.layerOpaque {
		f.opaque[p] = true
	}
}

// relevant reports whether p is root, under it, or one of its parents.
func (f *flattener) relevant(p string) bool {
	return within(p, f.root) || within(f.root, p)
}

// entry takes the entry p of the current layer. It returns the CRD folder
// when p is in it, whether it is, and whether the entry is kept at all
// (false for whiteouts and for paths that upper layers hide).
func (f *flattener) entry(p string, isDir bool) (string, bool, bool) {
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if base == ".wh..wh..opq" {
		if f.relevant(dir) {
			f.layerOpaque = append(f.layerOpaque, dir)
		}
		return "", false, false
	}
	if name, ok := strings.CutPrefix(base, ".wh."); ok {
		if target := path.Join(dir, name); f.relevant(target) {
			f.layerRemoved = append(f.layerRemoved, target)
		}
		return "", false, false
	}
	if !f.relevant(p) || f.hidden(p) {
		return "", false, false
	}
	f.seen[p] = isDir
	return f.root, within(p, f.root), true
}

// hidden reports whether an upper layer hides p: it has an entry at p
// (a lower folder at p is skipped too, but its contents merge, since only a
// non-folder parent hides them), whited p or a parent out, made a parent
// opaque, or replaced a parent with a file or link.
func (f *flattener) hidden(p string) bool {
	if _, ok := f.seen[p]; ok || f.removed[p] {
		return true
	}
	for q := parent(p); ; q = parent(q) {
		if f.removed[q] || f.opaque[q] {
			return true
		}
		if isDir, ok := f.seen[q]; ok && !isDir {
			return true
		}
		if q == "" {
			return false
		}
	}
}

// parent returns the folder of the clean relative path p; "" is the root.
func parent(p string) string {
	if d := path.Dir(p); d != "." {
		return d
	}
	return ""
}
