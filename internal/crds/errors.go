package crds

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrInvalidSource means the Source is not usable: none or several of
	// its fields are set, or its image path is not a clean path.
	ErrInvalidSource = errors.New("invalid CRD source")
	// ErrWrongArtifact means the artifact does not match the Source: it is
	// not a Helm chart, or it has no layer of the media type asked for.
	ErrWrongArtifact = errors.New("artifact does not match the CRD source")
	// ErrTooLarge means a layer is larger than Options.MaxLayerSize once
	// uncompressed, or the YAML files kept add up to more than that.
	ErrTooLarge = errors.New("over the size limit")
	// ErrTooManyFiles means the CRD folder holds more than Options.MaxFiles
	// entries.
	ErrTooManyFiles = errors.New("too many files")
	// ErrUnsafePath means a tar entry has an absolute path or a ".."
	// element, or is a symbolic or hard link that leads out of the CRD
	// folder.
	ErrUnsafePath = errors.New("unsafe path in archive")
	// ErrInvalidArchive means a layer is not a readable tar stream
	// (optionally gzip or zstd compressed).
	ErrInvalidArchive = errors.New("invalid archive")
	// ErrInvalidYAML means a YAML file of the CRD folder does not parse,
	// or has duplicate keys.
	ErrInvalidYAML = errors.New("invalid YAML")
	// ErrInvalidCRD means a CustomResourceDefinition has no name, a name
	// that is not a safe file name, or a name other than
	// <spec.names.plural>.<spec.group>.
	ErrInvalidCRD = errors.New("invalid CustomResourceDefinition")
	// ErrDuplicateCRD means two files of the artifact define the same CRD.
	ErrDuplicateCRD = errors.New("CustomResourceDefinition defined twice")
	// ErrNoCRDs means the artifact holds no CustomResourceDefinition where
	// the Source says. It is an error rather than an empty Bundle so that a
	// wrong path cannot be taken for a release without CRDs, and prune
	// every CRD file.
	ErrNoCRDs = errors.New("no CustomResourceDefinition found")
	// ErrPathEscapesRoot means the destination directory of Write leads
	// outside the checkout root or into its .git directory.
	ErrPathEscapesRoot = errors.New("CRD path escapes the checkout root")
)

// ArtifactError is the refusal of an artifact: where in it the problem is,
// and which problem (one of the Err* sentinels, which errors.Is finds).
type ArtifactError struct {
	// Layer is the digest of the layer, when the problem is in one.
	Layer string
	// Path is the tar entry or file of the problem, when there is one.
	Path string
	// Err is the problem.
	Err error
}

// Error says what was refused and where.
func (e *ArtifactError) Error() string {
	var b strings.Builder
	b.WriteString("refusing the artifact: ")
	if e.Layer != "" {
		fmt.Fprintf(&b, "layer %s: ", e.Layer)
	}
	if e.Path != "" {
		fmt.Fprintf(&b, "%s: ", e.Path)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the problem.
func (e *ArtifactError) Unwrap() error { return e.Err }
