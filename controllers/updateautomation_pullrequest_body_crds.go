package controllers

import (
	"fmt"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/uprev-dev/uprev/internal/notes"
)

// crdVersions is the part of a CRD manifest that says which versions it
// serves and stores.
type crdVersions struct {
	Spec struct {
		Versions []crdVersion `json:"versions"`
	} `json:"spec"`
}

// crdVersion is one version of a CRD.
type crdVersion struct {
	Name    string `json:"name"`
	Served  bool   `json:"served"`
	Storage bool   `json:"storage"`
}

// crdWarnings are the warnings of the run's CRD bundles for the pull
// request: each version of an updated CRD that was served or stored and
// that the new CRD drops or stops serving. Objects of a version no longer
// served cannot be read or written at it; a stored version dropped from
// the CRD makes the API server refuse the update until the stored objects
// are migrated and status.storedVersions trimmed.
func crdWarnings(run *automationRun) []string {
	var out []string
	for _, b := range run.crds {
		manifests := map[string][]byte{}
		for _, c := range b.bundle.CRDs {
			manifests[c.Name] = c.Manifest
		}
		for _, c := range b.result.Updated {
			out = append(out, crdVersionRemovals(c.Name, c.OldManifest, manifests[c.Name])...)
		}
	}
	return out
}

// crdVersionRemovals compares the versions of CRD name before (old) and
// after (new), both manifests in YAML.
func crdVersionRemovals(name string, old, new []byte) []string {
	var before, after crdVersions
	if err := yaml.Unmarshal(old, &before); err != nil {
		return nil
	}
	if err := yaml.Unmarshal(new, &after); err != nil {
		return nil
	}
	var out []string
	for _, v := range before.Spec.Versions {
		if !v.Served && !v.Storage {
			continue
		}
		i := slices.IndexFunc(after.Spec.Versions, func(n crdVersion) bool { return n.Name == v.Name })
		crd, version := notes.CodeSpan(name), notes.CodeSpan(v.Name)
		switch {
		case i < 0 && v.Storage:
			out = append(out, fmt.Sprintf("CRD %s drops version %s, its storage version: the API server refuses the update until objects stored at %s are migrated and status.storedVersions no longer lists it", crd, version, version))
		case i < 0:
			out = append(out, fmt.Sprintf("CRD %s drops version %s, which it served: clients and manifests that use %s stop working", crd, version, version))
		case v.Served && !after.Spec.Versions[i].Served:
			out = append(out, fmt.Sprintf("CRD %s no longer serves version %s: clients and manifests that use %s stop working", crd, version, version))
		}
	}
	return out
}
