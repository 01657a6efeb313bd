package install

import (
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartv2util "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// chartDir is the chart, from the repository root.
const chartDir = "charts/uprev"

// renderChart renders the chart of root (or the packaged chart at
// archive, when given) with Helm's own library, as `helm template` does,
// for a release named uprev in namespace with values, and returns its
// objects (NOTES.txt aside).
func renderChart(t *testing.T, root, namespace string, values map[string]any, archive ...string) []*unstructured.Unstructured {
	t.Helper()
	// Helm logs, through slog's default, each link it follows into
	// config/: by design here, not news.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	path := filepath.Join(root, chartDir)
	if len(archive) > 0 {
		path = archive[0]
	}
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, common.ReleaseOptions{Name: "uprev", Namespace: namespace, IsInstall: true}, nil)
	if err != nil {
		t.Fatalf("the chart's values: %v", err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		decoded, err := decodeObjects(files[name])
		if err != nil {
			t.Fatalf("decoding %s: %v\n%s", name, err, files[name])
		}
		objs = append(objs, decoded...)
	}
	return objs
}

// chartObjects keys objs by kind, namespace and name; a CRD's annotation
// that keeps it on uninstall, which kustomize has no need of, is
// checked and taken out.
func chartObjects(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	byKey := map[string]*unstructured.Unstructured{}
	for _, obj := range objs {
		if obj.GetKind() == "CustomResourceDefinition" {
			annotations := obj.GetAnnotations()
			if annotations["helm.sh/resource-policy"] != "keep" {
				t.Errorf("CRD %s is not kept on uninstall: deleting it would delete every object of its kind", obj.GetName())
			}
			delete(annotations, "helm.sh/resource-policy")
			if len(annotations) == 0 {
				annotations = nil
			}
			obj.SetAnnotations(annotations)
		}
		key := objectKey(obj)
		if _, dup := byKey[key]; dup {
			t.Errorf("the chart renders %s twice", key)
		}
		byKey[key] = obj
	}
	return byKey
}

// TestChartIsConfigDefault renders charts/uprev and shows that it is the
// install of config/default, config/multitenant and config/webhook (the
// same manager flags, RBAC and CRDs, object for object; the Namespace
// aside, which Helm leaves to --create-namespace) with the values that
// choose them, and that it installs on a real kube-apiserver.
func TestChartIsConfigDefault(t *testing.T) {
	k := newKubectl(t, "")
	for _, tc := range []struct {
		overlay string
		values  map[string]any
	}{
		{"config/default", nil},
		{"config/multitenant", map[string]any{"multitenant": map[string]any{"enabled": true}}},
		{"config/webhook", map[string]any{"webhook": map[string]any{"enabled": true}}},
	} {
		t.Run(tc.overlay, func(t *testing.T) {
			g := NewWithT(t)
			got := chartObjects(t, renderChart(t, k.root, namespace, tc.values))
			want := map[string]*unstructured.Unstructured{}
			for _, obj := range k.build(tc.overlay) {
				if obj.GetKind() != "Namespace" {
					want[objectKey(obj)] = obj
				}
			}
			g.Expect(len(want)).To(BeNumerically(">", 15), "kustomize built %s", tc.overlay)
			for key, obj := range want {
				g.Expect(got).To(HaveKey(key))
				if g := got[key]; g != nil {
					sameImage(t, obj, g)
					NewWithT(t).Expect(g.Object).To(Equal(obj.Object), key)
				}
			}
			for key := range got {
				g.Expect(want).To(HaveKey(key), "the chart renders an object %s does not", tc.overlay)
			}
		})
	}

	t.Run("tenants and monitoring", func(t *testing.T) {
		g := NewWithT(t)
		got := chartObjects(t, renderChart(t, k.root, "platform", map[string]any{
			"multitenant": map[string]any{"enabled": true, "tenantNamespaces": []any{"team-a"}},
			"monitoring":  map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}},
			"image":       map[string]any{"repository": "registry.example.com/uprev", "tag": "v9.9.9"},
			"controllers": []any{"sync"},
		}))
		binding := got["RoleBinding team-a/uprev-sync-impersonate"]
		g.Expect(binding).NotTo(BeNil(), "the tenant's RoleBinding of config/multitenant/tenant")
		subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
		g.Expect(subjects).To(ConsistOf(HaveKeyWithValue("namespace", "platform")), "naming the manager in the release's namespace")
		g.Expect(got).To(HaveKey("ServiceMonitor platform/uprev"))
		g.Expect(got).To(HaveKey("PrometheusRule platform/uprev"))
		matchNames, _, _ := unstructured.NestedStringSlice(got["ServiceMonitor platform/uprev"].Object, "spec", "namespaceSelector", "matchNames")
		g.Expect(matchNames).To(Equal([]string{"platform"}))
		dep := got["Deployment platform/uprev"]
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		manager := containers[0].(map[string]any)
		g.Expect(manager["image"]).To(Equal("registry.example.com/uprev:v9.9.9"))
		g.Expect(manager["args"]).To(ContainElements("--controllers=sync", "--default-service-account=default", "--no-cross-namespace-refs"))
	})

	t.Run("lints and packages", func(t *testing.T) {
		g := NewWithT(t)
		linter := lint.RunAll(filepath.Join(k.root, chartDir), nil, namespace)
		for _, m := range linter.Messages {
			g.Expect(m.Severity).To(BeNumerically("<", support.WarningSev), "helm lint: %s", m)
		}
		// The package (what the release pushes) carries config/'s files,
		// not links to them, and renders the same.
		ch, err := loader.Load(filepath.Join(k.root, chartDir))
		g.Expect(err).NotTo(HaveOccurred())
		packaged, err := chartv2util.Save(ch, t.TempDir())
		g.Expect(err).NotTo(HaveOccurred())
		fromPackage := chartObjects(t, renderChart(t, "", namespace, nil, packaged))
		fromDir := chartObjects(t, renderChart(t, k.root, namespace, nil))
		g.Expect(fromPackage).To(HaveLen(len(fromDir)))
		for key, obj := range fromDir {
			g.Expect(fromPackage).To(HaveKeyWithValue(key, obj))
		}
	})

	t.Run("installs", func(t *testing.T) {
		g := NewWithT(t)
		c := cluster.StartT(t)
		kc2, _ := kubectlOn(t, c)
		manifests := filepath.Join(t.TempDir(), "chart.yaml")
		var stream strings.Builder
		for _, obj := range renderChart(t, k.root, "uprev-chart", nil) {
			data, err := obj.MarshalJSON()
			g.Expect(err).NotTo(HaveOccurred())
			stream.WriteString("---\n")
			stream.Write(data)
			stream.WriteString("\n")
		}
		g.Expect(os.WriteFile(manifests, []byte(stream.String()), 0o600)).To(Succeed())
		kc2.run("create", "namespace", "uprev-chart")
		out, _ := kc2.run("apply", "--server-side", "--field-manager=helm", "-f", manifests)
		g.Expect(out).To(ContainSubstring("deployment.apps/uprev serverside-applied"))
		g.Expect(out).To(ContainSubstring("customresourcedefinition.apiextensions.k8s.io/syncs.uprev.dev serverside-applied"))
		out, _ = kc2.run("get", "clusterrolebinding", "uprev-manager", "-o", "jsonpath={.subjects[0].namespace}")
		g.Expect(out).To(Equal("uprev-chart"))
	})
}

// sameImage checks that want's manager container runs the image got's
// does: config/default pins the same version as the chart's appVersion.
func sameImage(t *testing.T, want, got *unstructured.Unstructured) {
	t.Helper()
	if want.GetKind() != "Deployment" {
		return
	}
	wantContainers, _, _ := unstructured.NestedSlice(want.Object, "spec", "template", "spec", "containers")
	gotContainers, _, _ := unstructured.NestedSlice(got.Object, "spec", "template", "spec", "containers")
	if len(gotContainers) != len(wantContainers) {
		t.Fatalf("the chart's Deployment has %d containers, config/default's %d", len(gotContainers), len(wantContainers))
	}
	for i := range wantContainers {
		wantImage, _ := wantContainers[i].(map[string]any)["image"].(string)
		gotImage, _ := gotContainers[i].(map[string]any)["image"].(string)
		if wantImage != gotImage {
			t.Errorf("the chart runs %s, config/default %s: the chart's appVersion and config/manager's newTag name one release", gotImage, wantImage)
		}
	}
}
