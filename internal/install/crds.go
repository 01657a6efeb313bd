package install

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// CRDs returns the CustomResourceDefinitions of m.
func (m *Manifests) CRDs() []*unstructured.Unstructured {
	var crds []*unstructured.Unstructured
	for _, obj := range m.Objects {
		if obj.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, obj)
		}
	}
	return crds
}

// crdVersion is what CRDDifference compares of one version of a CRD.
type crdVersion struct {
	name            string
	served, storage bool
	schema          []byte
}

// String describes the version as `uprev check` prints it.
func (v crdVersion) String() string {
	var flags []string
	if v.served {
		flags = append(flags, "served")
	}
	if v.storage {
		flags = append(flags, "storage")
	}
	return v.name + " (" + strings.Join(flags, ", ") + ")"
}

// crdVersions reads spec.versions of crd, each schema as canonical JSON.
func crdVersions(crd *unstructured.Unstructured) ([]crdVersion, error) {
	list, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if err != nil {
		return nil, fmt.Errorf("reading spec.versions of %s: %w", crd.GetName(), err)
	}
	var versions []crdVersion
	for _, item := range list {
		v, _ := item.(map[string]any)
		name, _, _ := unstructured.NestedString(v, "name")
		served, _, _ := unstructured.NestedBool(v, "served")
		storage, _, _ := unstructured.NestedBool(v, "storage")
		schema, _, _ := unstructured.NestedFieldNoCopy(v, "schema", "openAPIV3Schema")
		canonical, err := json.Marshal(schema)
		if err != nil {
			return nil, fmt.Errorf("reading the schema of %s %s: %w", crd.GetName(), name, err)
		}
		versions = append(versions, crdVersion{name: name, served: served, storage: storage, schema: canonical})
	}
	slices.SortFunc(versions, func(a, b crdVersion) int { return strings.Compare(a.name, b.name) })
	return versions, nil
}

// CRDDifference says how installed, a CRD read from the cluster, differs
// from want, the same CRD of an install: not established, other versions
// (by name, served and storage), or another schema of a version. It
// returns "" when installed is current: established, with want's versions
// and schemas.
func CRDDifference(want, installed *unstructured.Unstructured) (string, error) {
	if !established(installed) {
		return "not established", nil
	}
	wantVersions, err := crdVersions(want)
	if err != nil {
		return "", err
	}
	gotVersions, err := crdVersions(installed)
	if err != nil {
		return "", err
	}
	if !slices.EqualFunc(wantVersions, gotVersions, func(a, b crdVersion) bool {
		return a.name == b.name && a.served == b.served && a.storage == b.storage
	}) {
		return fmt.Sprintf("versions %s installed, this uprev's are %s", describe(gotVersions), describe(wantVersions)), nil
	}
	for i := range wantVersions {
		if !bytes.Equal(wantVersions[i].schema, gotVersions[i].schema) {
			return fmt.Sprintf("the schema of %s is not this uprev's", wantVersions[i].name), nil
		}
	}
	return "", nil
}

// DescribeVersions lists the versions of crd as `uprev check` prints them.
func DescribeVersions(crd *unstructured.Unstructured) string {
	versions, err := crdVersions(crd)
	if err != nil {
		return err.Error()
	}
	return describe(versions)
}

// describe joins versions for a message.
func describe(versions []crdVersion) string {
	parts := make([]string, 0, len(versions))
	for _, v := range versions {
		parts = append(parts, v.String())
	}
	return strings.Join(parts, ", ")
}

// established tells whether crd's Established condition is True.
func established(crd *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		cond, _ := c.(map[string]any)
		if cond["type"] == "Established" {
			return cond["status"] == "True"
		}
	}
	return false
}
