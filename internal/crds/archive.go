package crds

import (
	"archive/tar"
	"bufio"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// extraction collects the YAML files of the CRD folder from the layers
// read, within the limits of opts.
type extraction struct {
	ctx   context.Context
	opts  Options
	files map[string][]byte
	// kept is the total size of files.
	kept int64
	// entries is the number of tar entries seen in the CRD folder.
	entries int
}

// entryFilter tells readLayer, for the clean path p of a tar entry, the CRD
// folder (root) it belongs to, whether it is in that folder, and whether
// the entry counts at all (an image flattener drops hidden entries and
// whiteouts).
type entryFilter func(p string, isDir bool) (root string, inFolder, keep bool)

// readLayer streams the tar of layer, keeping the YAML files that filter
// puts in the CRD folder. image says the archive is an image filesystem,
// where a symbolic link to an absolute path points within the image.
func (x *extraction) readLayer(layer v1.Layer, filter entryFilter, image bool) error {
	digest, err := layer.Digest()
	if err != nil {
		return fmt.Errorf("reading the digest of a layer: %w", err)
	}
	rc, err := layer.Uncompressed()
	if err != nil {
		return fmt.Errorf("opening layer %s: %w", digest, err)
	}
	defer func() { _ = rc.Close() }() // read to the end already, or failed with its own error
	return x.readArchive(rc, digest.String(), filter, image)
}

// readArchive streams r, the tar (or tar+gzip) archive of the layer whose
// digest is layer, keeping the YAML files that filter puts in the CRD
// folder. It is readLayer without the image around the bytes, which lets
// the fuzz test feed it archives directly.
func (x *extraction) readArchive(r io.Reader, layer string, filter entryFilter, image bool) error {
	refuse := func(entry string, err error) error {
		return &ArtifactError{Layer: layer, Path: entry, Err: err}
	}
	stream, err := decompress(r)
	if err != nil {
		return refuse("", fmt.Errorf("%w: %w", ErrInvalidArchive, err))
	}
	counted := &countingReader{r: stream, max: x.opts.MaxLayerSize}
	// streamErr says why reading the stream failed: the limit, a broken
	// archive, or a failure of the registry or of the context.
	streamErr := func(entry string, err error) error {
		switch {
		case counted.over:
			return refuse("", fmt.Errorf("%w: more than %d bytes uncompressed", ErrTooLarge, x.opts.MaxLayerSize))
		case isArchiveError(err):
			return refuse(entry, fmt.Errorf("%w: %w", ErrInvalidArchive, err))
		}
		return fmt.Errorf("reading layer %s: %w", layer, err)
	}

	tr := tar.NewReader(counted)
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return streamErr("", err)
		}
		p, err := cleanEntry(hdr.Name)
		if err != nil {
			return refuse(hdr.Name, err)
		}
		if p == "" {
			continue
		}
		root, inFolder, keep := filter(p, hdr.Typeflag == tar.TypeDir)
		if !keep || !inFolder {
			continue
		}
		x.entries++
		if x.entries > x.opts.MaxFiles {
			return refuse(hdr.Name, fmt.Errorf("%w: more than %d entries in the CRD folder", ErrTooManyFiles, x.opts.MaxFiles))
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			if !isYAMLName(p) {
				continue
			}
			if hdr.Size > x.opts.MaxLayerSize-x.kept {
				return refuse(hdr.Name, fmt.Errorf("%w: the YAML files of the CRD folder add up to more than %d bytes", ErrTooLarge, x.opts.MaxLayerSize))
			}
			data := make([]byte, hdr.Size)
			if _, err := io.ReadFull(tr, data); err != nil {
				return streamErr(hdr.Name, err)
			}
			x.kept += hdr.Size
			x.files[p] = data
		case tar.TypeSymlink:
			if linkLeaves(p, hdr.Linkname, root, image) {
				return refuse(hdr.Name, fmt.Errorf("%w: symbolic link to %s leads out of %s", ErrUnsafePath, hdr.Linkname, folderName(root)))
			}
		case tar.TypeLink:
			target, err := cleanEntry(hdr.Linkname)
			if err != nil || !within(target, root) {
				return refuse(hdr.Name, fmt.Errorf("%w: hard link to %s leads out of %s", ErrUnsafePath, hdr.Linkname, folderName(root)))
			}
		}
	}
	// Read to the end, so that the digest of a layer from a registry is
	// checked: it is, once its last byte is read.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return streamErr("", err)
	}
	return nil
}

// decompress returns the tar stream of r. Layers from a registry are
// already decompressed by go-containerregistry; a layer that still starts
// with the gzip magic number (a static layer holding a .tar.gz) is
// decompressed here.
func decompress(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 32<<10)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		return gz, nil
	}
	return br, nil
}

// isArchiveError reports whether err says the archive itself is broken.
func isArchiveError(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, tar.ErrHeader) || errors.Is(err, tar.ErrFieldTooLong) ||
		errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &corrupt)
}

// cleanEntry returns the clean path of a tar entry name, "" for the
// archive root. Absolute names and names with a ".." element are refused:
// no well-made artifact has them, and they are how archives write outside
// the folder they are unpacked into.
func cleanEntry(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: absolute path", ErrUnsafePath)
	}
	if slices.Contains(strings.Split(name, "/"), "..") {
		return "", fmt.Errorf("%w: path with a .. element", ErrUnsafePath)
	}
	p := path.Clean(name)
	if p == "." {
		return "", nil
	}
	return p, nil
}

// linkLeaves reports whether the symbolic link p to target resolves to a
// place outside root, or is root itself. An absolute target is refused,
// except in an image, where it is relative to the image's root.
func linkLeaves(p, target, root string, image bool) bool {
	if p == root {
		return true
	}
	var resolved string
	if strings.HasPrefix(target, "/") {
		if !image {
			return true
		}
		resolved = strings.TrimPrefix(path.Clean(target), "/")
	} else {
		resolved = path.Join(path.Dir(p), target)
		if resolved == ".." || strings.HasPrefix(resolved, "../") {
			return true
		}
		if resolved == "." {
			resolved = ""
		}
	}
	return !within(resolved, root)
}

func folderName(root string) string {
	if root == "" {
		return "the archive"
	}
	return root
}

// isYAMLName reports whether a file name has a YAML (or JSON) extension.
func isYAMLName(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// countingReader counts the bytes read and fails once there are more than
// max.
type countingReader struct {
	r    io.Reader
	n    int64
	max  int64
	over bool
}

var errOverLimit = errors.New("over the size limit")

func (c *countingReader) Read(p []byte) (int, error) {
	if c.over {
		return 0, errOverLimit
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		c.over = true
		return n, errOverLimit
	}
	return n, err
}
