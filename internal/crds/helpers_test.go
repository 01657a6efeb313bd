package crds

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/uprev-dev/uprev/internal/registry"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// fluxConfigMediaType is the config media type of a Flux OCI artifact.
const fluxConfigMediaType = "application/vnd.cncf.flux.config.v1+json"

// crdYAML returns a CRD manifest for <plural>.<group> labelled with
// version, with a status and a creation timestamp as a CRD copied out of a
// cluster has, which normalisation drops.
func crdYAML(plural, group, version string) string {
	kind := strings.ToUpper(plural[:1]) + strings.TrimSuffix(plural[1:], "s")
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.%[2]s
  creationTimestamp: null
  labels:
    app.kubernetes.io/version: %[3]q
spec:
  group: %[2]s
  names:
    kind: %[4]s
    listKind: %[4]sList
    plural: %[1]s
    singular: %[5]s
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
status:
  acceptedNames: {kind: "", plural: ""}
  conditions: []
  storedVersions: []
`, plural, group, version, kind, strings.TrimSuffix(plural, "s"))
}

// clusterRoleBindingYAML is a document an artifact must not slip into Git.
const clusterRoleBindingYAML = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: agent-is-admin
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {kind: ServiceAccount, name: agent, namespace: kube-system}
`

// entry is one entry of a test tar archive: a file unless Type says
// otherwise.
type entry struct {
	Name string
	Body string
	Type byte
	Link string
}

// file returns a regular file entry.
func file(name, body string) entry { return entry{Name: name, Body: body} }

// tarBytes returns an uncompressed tar archive of entries.
func tarBytes(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Mode: 0o644, Size: int64(len(e.Body)), Typeflag: e.Type, Linkname: e.Link}
		if e.Type == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if hdr.Typeflag == tar.TypeDir {
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("writing tar header %s: %v", e.Name, err)
		}
		if hdr.Size > 0 {
			if _, err := io.WriteString(tw, e.Body); err != nil {
				t.Fatalf("writing tar entry %s: %v", e.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("closing tar: %v", err)
	}
	return buf.Bytes()
}

// imageLayer returns a gzip-compressed container image layer of entries.
func imageLayer(t testing.TB, entries ...entry) v1.Layer {
	t.Helper()
	return testregistry.Layer(t, tarBytes(t, entries...))
}

// helmChart returns a Helm chart artifact named name whose archive holds
// Chart.yaml, a template, and a crds/ file per entry of crds.
func helmChart(t testing.TB, name, version string, crds map[string]string) v1.Image {
	t.Helper()
	entries := []entry{
		{Name: name + "/", Type: tar.TypeDir},
		file(name+"/Chart.yaml", "apiVersion: v2\nname: "+name+"\nversion: "+version+"\n"),
		file(name+"/values.yaml", "replicas: 1\n"),
		// A template is not a CRD file, even if it holds one.
		file(name+"/templates/crd.yaml", crdYAML("templates", "example.com", version)),
		{Name: name + "/crds/", Type: tar.TypeDir},
	}
	for file, body := range crds {
		entries = append(entries, entry{Name: name + "/crds/" + file, Body: body})
	}
	return testregistry.Artifact(t, ChartConfigMediaType, ChartLayerMediaType, testregistry.Gzip(t, tarBytes(t, entries...)))
}

// fluxArtifact returns a Flux OCI artifact whose content layer holds
// entries.
func fluxArtifact(t testing.TB, entries ...entry) v1.Image {
	t.Helper()
	return testregistry.Artifact(t, fluxConfigMediaType, FluxContentMediaType, testregistry.Gzip(t, tarBytes(t, entries...)))
}

// pushAndPull pushes img to the registry r as repo:tag and reads it back
// by digest with a registry Client, as the automation does, into an OCI
// layout on disk (the pull's deadline ends with ReadArtifact).
func pushAndPull(t testing.TB, r *testregistry.Registry, repo, tag string, img v1.Image) v1.Image {
	t.Helper()
	digest := r.Push(t, repo, tag, img)
	c, err := registry.NewScanner(registry.ScannerOptions{}).Client(t.Context(), registry.Access{})
	if err != nil {
		t.Fatalf("making a registry client: %v", err)
	}
	var pulled v1.Image
	err = c.ReadArtifact(t.Context(), r.Image(repo), digest, func(img v1.Image) error {
		store, err := layout.Write(t.TempDir(), empty.Index)
		if err != nil {
			return err
		}
		if err := store.AppendImage(img); err != nil {
			return err
		}
		d, err := img.Digest()
		if err != nil {
			return err
		}
		pulled, err = store.Image(d)
		return err
	})
	if err != nil {
		t.Fatalf("pulling %s@%s: %v", repo, digest, err)
	}
	return pulled
}

// update extracts the CRDs of img and writes them to dir under root, as
// the automation does: nothing is written when extraction fails.
func update(t testing.TB, img v1.Image, src Source, root, dir string, opts WriteOptions) (Result, error) {
	t.Helper()
	bundle, err := Extract(t.Context(), img, src, Options{})
	if err != nil {
		return Result{}, err
	}
	return Write(root, dir, bundle, opts)
}

// snapshot returns every file under root with its content; links as
// "-> target".
func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			files[rel] = "-> " + target
			return err
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			files[rel] = string(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", root, err)
	}
	return files
}

// readFile returns the content of root/name.
func readFile(t testing.TB, root, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return string(data)
}

// names returns the names of changes.
func names(changes []Change) []string {
	out := make([]string, len(changes))
	for i, c := range changes {
		out[i] = c.Name
	}
	return out
}
