// Package update rewrites the values that Flux image-automation setter
// markers point at, in a directory of YAML files.
//
// A marker is a YAML line comment on a scalar value:
//
//	image: ghcr.io/acme/agent:1.4.1 # {"$imagepolicy": "uprev-system:agent"}
//	tag: 1.4.1                      # {"$imagepolicy": "uprev-system:agent:tag"}
//
// The bare form sets the whole reference (name:tag, plus @digest where the
// policy reports one); the suffixes :name, :tag and :digest set one part.
// The markers, their JSON form and their namespace:name syntax are Flux's,
// so repositories automated by Flux work unchanged.
//
// RewriteMarkers is pure: it reads the files under one directory of a
// checkout, asks a Guard about every change it would make, and writes back
// only the files whose values changed. It knows nothing of Git or
// Kubernetes clients.
//
// # Why values are spliced into the original bytes
//
// Flux rewrites files through a kyaml round trip: the file is parsed into a
// node tree, the marked nodes are set, and the tree is serialised again.
// Serialising reformats the whole file: indentation of sequences is
// normalised, quoting and flow style can change, long strings are re-wrapped,
// comments move, and document separators are re-emitted. In a GitOps
// repository every one of those changes is a line in a commit a person has
// to review, and a conflict for whoever edited the same file.
//
// This package parses each marked file with gopkg.in/yaml.v3 only to find
// the marked scalars (node Line/Column and LineComment), then replaces the
// bytes of each changed scalar in the original file and nothing else. The
// new value keeps the scalar's quoting style (plain, 'single' or "double");
// a plain value that YAML would read as something other than a string (for
// example the tag 1.10) is written double-quoted instead. After splicing,
// the file is parsed again and every marked value is checked against what
// was meant to be written; a file that does not check out is reported and
// left as it was. Comments, blank lines, indentation, key order, anchors,
// block scalars and document separators therefore stay byte for byte.
//
// Markers on block scalars (| and >), on multi-line plain or quoted scalars,
// on aliases and on collections are reported as invalid markers: their
// value cannot be replaced on one line without reformatting.
package update
