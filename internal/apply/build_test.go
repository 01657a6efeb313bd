package apply

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func names(objects []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objects {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

func TestBuildPlainYAML(t *testing.T) {
	g := NewWithT(t)
	dir := writeDir(t, map[string]string{
		"a.yaml": `---
apiVersion: v1
kind: ConfigMap
metadata: {name: one, namespace: x}
data: {replicas: "3"}
---
# only a comment
---
apiVersion: v1
kind: ConfigMap
metadata: {name: two, namespace: x}
`,
		"sub/b.yml": `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Secret
  metadata: {name: three, namespace: x}
- apiVersion: v1
  kind: Service
  metadata: {name: four, namespace: x}
  spec: {ports: [{port: 80}]}
`,
		"README.md":            "# not a manifest",
		".github/ci.yaml":      "on: push\njobs: {}\n",
		"sub/values.json":      `{"ignored": true}`,
		"sub/deeper/c.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: five, namespace: x}\nspec: {replicas: 2}\n",
		"sub/deeper/empty.yml": "",
	})
	objects, err := Build(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(objects)).To(Equal([]string{
		"ConfigMap/one", "ConfigMap/two", "Secret/three", "Service/four", "Deployment/five",
	}))
	replicas, _, _ := unstructured.NestedInt64(objects[4].Object, "spec", "replicas")
	g.Expect(replicas).To(Equal(int64(2)), "integers stay integers")
}

func TestBuildKustomization(t *testing.T) {
	g := NewWithT(t)
	root := writeDir(t, map[string]string{
		"base/kustomization.yaml": "resources: [app.yaml]\n",
		"base/app.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {k: v}\n",
		"clusters/prod/kustomization.yaml": `resources: [../../base, extra.yaml]
namespace: prod
namePrefix: prod-
labels:
- pairs: {env: prod}
`,
		"clusters/prod/extra.yaml":   "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\n",
		"clusters/prod/ignored.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: not-listed}\n",
	})
	objects, err := BuildWithin(root, "clusters/prod")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(objects)).To(ConsistOf("ConfigMap/prod-app", "Secret/prod-creds"))
	for _, o := range objects {
		g.Expect(o.GetNamespace()).To(Equal("prod"))
		g.Expect(o.GetLabels()).To(HaveKeyWithValue("env", "prod"))
	}

	// Build confines the build to the directory itself: the base in a
	// parent directory is out of reach.
	_, err = Build(filepath.Join(root, "clusters", "prod"))
	var buildErr *BuildError
	g.Expect(errors.As(err, &buildErr)).To(BeTrue(), "got %v", err)
}

func TestBuildErrors(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		files map[string]string
		file  string
		msg   string
	}{{
		name:  "invalid YAML",
		files: map[string]string{"ok.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n", "bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [unclosed\n"},
		file:  "bad.yaml",
		msg:   "document 1",
	}, {
		name:  "object without kind",
		files: map[string]string{"nokind.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n"},
		file:  "nokind.yaml",
		msg:   "document 2: object b has no kind",
	}, {
		name:  "object without name",
		files: map[string]string{"noname.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: x}\n"},
		file:  "noname.yaml",
		msg:   "has no metadata.name",
	}, {
		name:  "the same object twice",
		files: map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n", "b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n"},
		file:  "b.yaml",
		msg:   "also defined in",
	}, {
		name:  "kustomization with a missing resource",
		files: map[string]string{"kustomization.yaml": "resources: [missing.yaml]\n"},
		msg:   "missing.yaml",
	}, {
		name:  "kustomization with invalid YAML in a resource",
		files: map[string]string{"kustomization.yaml": "resources: [bad.yaml]\n", "bad.yaml": "kind: [\n"},
		msg:   "bad.yaml",
	}, {
		name:  "kustomization reading outside the root",
		files: map[string]string{"kustomization.yaml": "resources: [" + filepath.Join(outside, "secret.yaml") + "]\n"},
		msg:   "outside",
	}, {
		name:  "kustomization with a remote base",
		files: map[string]string{"kustomization.yaml": "resources:\n- https://github.com/acme/fleet//base?ref=main\n"},
		msg:   "remote location",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := writeDir(t, tt.files)
			objects, err := Build(dir)
			g.Expect(objects).To(BeEmpty())
			var buildErr *BuildError
			g.Expect(errors.As(err, &buildErr)).To(BeTrue(), "got %v", err)
			if tt.file != "" {
				g.Expect(filepath.Base(buildErr.Path)).To(Equal(tt.file))
			}
			g.Expect(err.Error()).To(ContainSubstring(tt.msg))
		})
	}
}

func TestBuildRefusesSymlinkOutsideRoot(t *testing.T) {
	g := NewWithT(t)
	outside := t.TempDir()
	target := filepath.Join(outside, "secret.yaml")
	g.Expect(os.WriteFile(target, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n"), 0o644)).To(Succeed())
	dir := t.TempDir()
	g.Expect(os.Symlink(target, filepath.Join(dir, "link.yaml"))).To(Succeed())
	_, err := Build(dir)
	var buildErr *BuildError
	g.Expect(errors.As(err, &buildErr)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("link.yaml: path escapes"))
}
