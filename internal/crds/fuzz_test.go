package crds

import (
	"archive/tar"
	"bytes"
	"errors"
	"testing"

	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// FuzzExtractArtifact feeds arbitrary bytes as the layer of a Flux
// artifact to the archive reader and then to the CRD parser, as Extract
// does once it has the layer: the image around the layer is left out, so
// that each input costs only the reading. It must never panic, must refuse
// with an error from the list, and what it accepts must be CRDs with safe
// names whose manifests are already normalised.
func FuzzExtractArtifact(f *testing.F) {
	crd := crdYAML("agents", "example.com", "1.0.0")
	f.Add(tarBytes(f, file("agents.yaml", crd)))
	f.Add(testregistry.Gzip(f, tarBytes(f, file("crds/agents.yaml", crd+"---\n"+clusterRoleBindingYAML))))
	f.Add(tarBytes(f, file("../agents.yaml", crd)))
	f.Add(tarBytes(f, file("agents.yaml", crd), entry{Name: "l.yaml", Type: tar.TypeSymlink, Link: "../x"}))
	f.Add(tarBytes(f, file("a.yaml", minimalCRD), entry{Name: "b.yaml", Type: tar.TypeLink, Link: "a.yaml"}, entry{Name: "d/", Type: tar.TypeDir}))
	f.Add(tarBytes(f, file("agents.yaml", "apiVersion: [")))
	f.Add([]byte("not a tar"))
	opts := Options{MaxLayerSize: 1 << 20, MaxFiles: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		x := &extraction{ctx: t.Context(), opts: opts, files: map[string][]byte{}}
		err := x.readArchive(bytes.NewReader(data), "sha256:fuzz", wholeArchive, false)
		var bundle *Bundle
		if err == nil {
			bundle, err = parseFiles(x.files)
		}
		if err != nil {
			var refused *ArtifactError
			if !errors.As(err, &refused) {
				t.Fatalf("error is not an ArtifactError: %v", err)
			}
			return
		}
		for _, c := range bundle.CRDs {
			checkNormalised(t, c)
		}
	})
}

// minimalCRD is a small CRD that parseDocument accepts, for seeds the
// fuzzer can shrink quickly.
const minimalCRD = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a.b.c}\nspec: {group: b.c, names: {plural: a}}\n"

// FuzzParseDocument checks that any CRD accepted has a safe name and that
// normalising its manifest again gives the same bytes.
func FuzzParseDocument(f *testing.F) {
	f.Add([]byte(crdYAML("agents", "example.com", "1.0.0")))
	f.Add([]byte(clusterRoleBindingYAML))
	f.Add([]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"a.b.c"},"spec":{"group":"b.c","names":{"plural":"a"}}}`))
	f.Add([]byte(minimalCRD))
	f.Add([]byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: &a a.b.c}\nspec: {group: b.c, names: {plural: a}, x: *a}\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		crd, _, err := parseDocument(doc)
		if err != nil || crd == nil {
			return
		}
		checkNormalised(t, *crd)
	})
}

func checkNormalised(t *testing.T, c CRD) {
	t.Helper()
	if !safeName.MatchString(c.Name) || len(c.Name) > 253 {
		t.Fatalf("unsafe CRD name %q accepted", c.Name)
	}
	again, _, err := parseDocument(c.Manifest)
	if err != nil || again == nil {
		t.Fatalf("normalised manifest of %s does not parse again: %v\n%s", c.Name, err, c.Manifest)
	}
	if !bytes.Equal(again.Manifest, c.Manifest) {
		t.Fatalf("normalising %s twice changes it:\n%s\n---\n%s", c.Name, c.Manifest, again.Manifest)
	}
}
