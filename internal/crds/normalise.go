package crds

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	crdAPIVersion = "apiextensions.k8s.io/v1"
	crdKind       = "CustomResourceDefinition"
	// versionLabel is the label a CRD's version is read from.
	versionLabel = "app.kubernetes.io/version"
)

// safeName is a DNS subdomain with at least one dot, as CRD names are
// (<plural>.<group>, and a group has a dot): lower-case letters, digits,
// '-' and '.', so it is a safe file name.
var safeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`)

// serverSetMetadata are the metadata fields the API server sets, which a
// CRD copied out of a cluster carries and a manifest should not.
var serverSetMetadata = []string{"creationTimestamp", "generation", "managedFields", "resourceVersion", "selfLink", "uid"}

// parseFiles reads the documents of files and returns the CRDs among them.
// Files are read in the order of their paths, so that the result does not
// depend on the order of the archive.
func parseFiles(files map[string][]byte) (*Bundle, error) {
	bundle := &Bundle{IgnoredKinds: map[string]int{}}
	from := map[string]string{}
	for _, file := range slices.Sorted(maps.Keys(files)) {
		docs, err := splitDocuments(files[file])
		if err != nil {
			return nil, &ArtifactError{Path: file, Err: fmt.Errorf("%w: %w", ErrInvalidYAML, err)}
		}
		for _, doc := range docs {
			crd, kind, err := parseDocument(doc)
			if err != nil {
				return nil, &ArtifactError{Path: file, Err: err}
			}
			switch {
			case kind == "":
			case crd == nil:
				bundle.Ignored++
				bundle.IgnoredKinds[kind]++
			case from[crd.Name] != "":
				return nil, &ArtifactError{Path: file, Err: fmt.Errorf("%w: %s, also in %s", ErrDuplicateCRD, crd.Name, from[crd.Name])}
			default:
				crd.Source = file
				from[crd.Name] = file
				bundle.CRDs = append(bundle.CRDs, *crd)
			}
		}
	}
	if len(bundle.CRDs) == 0 {
		return nil, &ArtifactError{Err: fmt.Errorf("%w (%d other documents ignored)", ErrNoCRDs, bundle.Ignored)}
	}
	slices.SortFunc(bundle.CRDs, func(a, b CRD) int { return strings.Compare(a.Name, b.Name) })
	return bundle, nil
}

// splitDocuments splits a YAML stream at its --- separators.
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
}

// parseDocument parses one YAML document. It returns the CRD it holds, or
// nil and the document's "<apiVersion> <kind>" for another object; kind is
// "" for an empty document. An invalid document gives an error wrapping
// ErrInvalidYAML or ErrInvalidCRD.
func parseDocument(doc []byte) (*CRD, string, error) {
	// Strict: duplicate keys are an error rather than last-one-wins.
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalidYAML, err)
	}
	j = bytes.TrimSpace(j)
	if len(j) == 0 || bytes.Equal(j, []byte("null")) {
		return nil, "", nil
	}
	if j[0] != '{' {
		return nil, "(not an object)", nil
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(j))
	// Numbers stay as written, with no float rounding.
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalidYAML, err)
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion != crdAPIVersion || kind != crdKind {
		if apiVersion == "" && kind == "" {
			return nil, "(no apiVersion or kind)", nil
		}
		return nil, apiVersion + " " + kind, nil
	}
	crd, err := normalise(obj)
	if err != nil {
		return nil, "", err
	}
	return crd, crdAPIVersion + " " + crdKind, nil
}

// normalise checks the name of the CRD obj and returns it with the fields
// that do not belong in a manifest dropped, as YAML with sorted keys.
func normalise(obj map[string]any) (*CRD, error) {
	metadata, _ := obj["metadata"].(map[string]any)
	name, _ := metadata["name"].(string)
	if name == "" {
		return nil, fmt.Errorf("%w: no metadata.name", ErrInvalidCRD)
	}
	if len(name) > 253 || !safeName.MatchString(name) {
		return nil, fmt.Errorf("%w: name %q is not a DNS subdomain with a dot (<plural>.<group>)", ErrInvalidCRD, name)
	}
	spec, _ := obj["spec"].(map[string]any)
	group, _ := spec["group"].(string)
	names, _ := spec["names"].(map[string]any)
	plural, _ := names["plural"].(string)
	if name != plural+"."+group {
		return nil, fmt.Errorf("%w: name %q is not <spec.names.plural>.<spec.group> (%q)", ErrInvalidCRD, name, plural+"."+group)
	}
	delete(obj, "status")
	for _, field := range serverSetMetadata {
		delete(metadata, field)
	}
	var version string
	if labels, ok := metadata["labels"].(map[string]any); ok {
		version, _ = labels[versionLabel].(string)
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidCRD, name, err)
	}
	return &CRD{Name: name, Version: version, Manifest: out}, nil
}
