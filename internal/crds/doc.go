// Package crds takes the CustomResourceDefinitions that ship inside a
// release artifact and writes them into a directory of a Git checkout, one
// file per CRD, so that a version bump and its CRDs are committed together
// (UpdateAutomation spec.crds).
//
// Extract reads the CRDs of an artifact, a go-containerregistry v1.Image
// read at the digest its policy selected. Three kinds of Source are known:
// the crds/ folder of a Helm chart stored in an OCI registry, a folder of a
// container image's filesystem (its layers flattened in order, whiteouts
// honoured), and the tar+gzip layer of one media type of an OCI artifact
// (Flux's content layer). Only apiextensions.k8s.io/v1
// CustomResourceDefinition documents are kept; every other document is
// ignored and counted, so an artifact cannot slip a ClusterRoleBinding into
// Git. Each CRD is normalised (keys sorted, status and server-set metadata
// dropped), so that the same CRD always gives the same bytes.
//
// Write then puts the CRDs into a directory given relative to a checkout
// root, as <metadata.name>.yaml files, and reports what was added, updated,
// left unchanged and removed, with versions, for the commit message
// (Result.Summary). A CRD that the new version no longer ships is kept,
// since deleting a CRD deletes every object of its kind, unless
// WriteOptions.Prune is set.
//
// Artifacts are untrusted input. Layers are streamed, never held whole in
// memory, and only the YAML files of the CRD folder are kept. A layer larger
// than Options.MaxLayerSize uncompressed, more than Options.MaxFiles entries
// in the CRD folder, tar entries with absolute paths or "..", links leading
// out of the folder, invalid YAML, and CRD names that are not safe file
// names are refused with an *ArtifactError wrapping one of the Err*
// sentinels. Extract writes nothing, and Write starts writing only once
// everything was read and checked, so a refused artifact leaves the
// directory as it was.
package crds
