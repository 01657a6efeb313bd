package apply

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

// recorder is a server of the tenant's that answers every request with a
// valid document and records the paths asked for: a build must never ask.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.URL.Path)
		r.mu.Unlock()
		switch {
		case strings.HasSuffix(req.URL.Path, ".env"):
			_, _ = w.Write([]byte("INTERNAL=answer\n"))
		case strings.HasSuffix(req.URL.Path, ".json"):
			_, _ = w.Write([]byte(`{"definitions": {}}`))
		case strings.Contains(req.URL.Path, "patch"):
			_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {fetched: answer}\n"))
		case strings.Contains(req.URL.Path, "replacement"):
			_, _ = w.Write([]byte("- source: {kind: ConfigMap, name: app, fieldPath: data.k}\n  targets: [{select: {kind: ConfigMap}, fieldPaths: [data.copy]}]\n"))
		default:
			_, _ = w.Write([]byte("answer from an internal address\n"))
		}
	}))
	t.Cleanup(r.Close)
	return r
}

// requests returns the paths asked for so far.
func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// TestKustomizeFetchesNothing shows that no field of a kustomization makes
// the build fetch a URL: each remote path is a build error that names the
// file and the field, and the tenant's server hears nothing.
func TestKustomizeFetchesNothing(t *testing.T) {
	srv := newRecorder(t)
	app := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {k: v}\n"
	tests := []struct {
		name  string
		files map[string]string
		field string
	}{{
		name:  "configMapGenerator files",
		files: map[string]string{"kustomization.yaml": "configMapGenerator:\n- name: leak\n  files:\n  - " + srv.URL + "/secret.txt\n"},
		field: "configMapGenerator[0].files[0]",
	}, {
		name:  "configMapGenerator files with a key",
		files: map[string]string{"kustomization.yaml": "configMapGenerator:\n- name: leak\n  files:\n  - key=" + srv.URL + "/secret.txt\n"},
		field: "configMapGenerator[0].files[0]",
	}, {
		name:  "configMapGenerator envs",
		files: map[string]string{"kustomization.yaml": "configMapGenerator:\n- name: leak\n  envs:\n  - " + srv.URL + "/secret.env\n"},
		field: "configMapGenerator[0].envs[0]",
	}, {
		name:  "secretGenerator files",
		files: map[string]string{"kustomization.yaml": "secretGenerator:\n- name: leak\n  files:\n  - " + srv.URL + "/secret.txt\n"},
		field: "secretGenerator[0].files[0]",
	}, {
		name:  "patches path",
		files: map[string]string{"kustomization.yaml": "resources: [app.yaml]\npatches:\n- path: " + srv.URL + "/patch.yaml\n", "app.yaml": app},
		field: "patches[0].path",
	}, {
		name:  "patchesStrategicMerge",
		files: map[string]string{"kustomization.yaml": "resources: [app.yaml]\npatchesStrategicMerge:\n- " + srv.URL + "/patch.yaml\n", "app.yaml": app},
		field: "patchesStrategicMerge[0]",
	}, {
		name:  "replacements path",
		files: map[string]string{"kustomization.yaml": "resources: [app.yaml]\nreplacements:\n- path: " + srv.URL + "/replacement.yaml\n", "app.yaml": app},
		field: "replacements[0].path",
	}, {
		name:  "openapi path",
		files: map[string]string{"kustomization.yaml": "resources: [app.yaml]\nopenapi:\n  path: " + srv.URL + "/schema.json\n", "app.yaml": app},
		field: "openapi.path",
	}, {
		name:  "crds",
		files: map[string]string{"kustomization.yaml": "resources: [app.yaml]\ncrds:\n- " + srv.URL + "/crd.json\n", "app.yaml": app},
		field: "crds[0]",
	}, {
		name:  "configurations",
		files: map[string]string{"kustomization.yaml": "resources: [app.yaml]\nconfigurations:\n- " + srv.URL + "/config.yaml\n", "app.yaml": app},
		field: "configurations[0]",
	}, {
		name:  "resources",
		files: map[string]string{"kustomization.yaml": "resources:\n- " + srv.URL + "/app.yaml\n"},
		field: "resources[0]",
	}, {
		name: "a base's kustomization",
		files: map[string]string{
			"kustomization.yaml":      "resources: [base]\n",
			"base/kustomization.yaml": "configMapGenerator:\n- name: leak\n  files: [" + srv.URL + "/secret.txt]\n",
		},
		field: "base/kustomization.yaml: configMapGenerator[0].files[0]",
	}, {
		name: "a builtin transformer's configuration file",
		files: map[string]string{
			"kustomization.yaml": "resources: [app.yaml]\ntransformers: [patch.yaml]\n",
			"app.yaml":           app,
			"patch.yaml":         "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: fetch}\npath: " + srv.URL + "/patch.yaml\n",
		},
		field: "patch.yaml: PatchTransformer fetch: path",
	}, {
		name: "a builtin transformer's configuration file that escapes its apiVersion",
		files: map[string]string{
			"kustomization.yaml": "resources: [app.yaml]\ntransformers: [patch.yaml]\n",
			"app.yaml":           app,
			"patch.yaml":         "apiVersion: \"\\x62uilt\\u0069n\"\nkind: PatchTransformer\nmetadata: {name: fetch}\npath: " + srv.URL + "/patch.yaml\n",
		},
		field: "patch.yaml: PatchTransformer fetch: path",
	}, {
		name: "an inline builtin generator",
		files: map[string]string{
			"kustomization.yaml": "generators:\n- |\n  apiVersion: builtin\n  kind: ConfigMapGenerator\n  metadata: {name: leak}\n  files: [" + srv.URL + "/secret.txt]\n",
		},
		field: "generators[0]: ConfigMapGenerator leak: files[0]",
	}, {
		name: "an inline builtin transformer in flow style",
		files: map[string]string{
			"kustomization.yaml": "resources: [app.yaml]\ntransformers:\n- '{apiVersion: builtin, kind: PatchTransformer, metadata: {name: fetch}, path: \"" + srv.URL + "/patch.yaml\"}'\n",
			"app.yaml":           app,
		},
		field: "transformers[0]: PatchTransformer fetch: path",
	}, {
		name:  "a URL hidden in an annotation and merged into a patch",
		files: map[string]string{"kustomization.yaml": "resources: [app.yaml]\ncommonAnnotations: &p {path: " + srv.URL + "/patch.yaml}\npatches:\n- <<: *p\n", "app.yaml": app},
		field: "patches[0].path",
	}, {
		name:  "a key in another case",
		files: map[string]string{"kustomization.yaml": "resources: [app.yaml]\nPatches:\n- Path: " + strings.ToUpper(srv.URL[:4]) + srv.URL[4:] + "/patch.yaml\n", "app.yaml": app},
		field: "Patches[0].Path",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			before := len(srv.requests())
			objects, err := Build(writeDir(t, tt.files))
			g.Expect(srv.requests()[before:]).To(BeEmpty(), "the build must not fetch anything")
			g.Expect(objects).To(BeEmpty())
			var buildErr *BuildError
			g.Expect(errors.As(err, &buildErr)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(And(ContainSubstring(tt.field), ContainSubstring("remote")))
		})
	}
}

// TestKustomizeKeepsURLsThatAreValues shows that a URL kustomize only
// copies, such as an annotation's value, still builds.
func TestKustomizeKeepsURLsThatAreValues(t *testing.T) {
	g := NewWithT(t)
	dir := writeDir(t, map[string]string{
		"kustomization.yaml": `resources: [app.yaml]
commonAnnotations:
  docs: https://docs.example.com/app
configMapGenerator:
- name: settings
  literals:
  - endpoint=https://api.example.com
  options:
    annotations: {source: "https://example.com/settings"}
`,
		"app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {url: https://example.com}\n",
	})
	objects, err := Build(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objects).To(HaveLen(2))
	for _, o := range objects {
		g.Expect(o.GetAnnotations()).To(HaveKeyWithValue("docs", "https://docs.example.com/app"))
	}
}
