package install

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// installedCopy returns crd as the API server returns it once established.
func installedCopy(crd *unstructured.Unstructured) *unstructured.Unstructured {
	got := crd.DeepCopy()
	_ = unstructured.SetNestedSlice(got.Object, []any{
		map[string]any{"type": "NamesAccepted", "status": "True"},
		map[string]any{"type": "Established", "status": "True"},
	}, "status", "conditions")
	return got
}

func TestCRDDifference(t *testing.T) {
	m, err := Build(Options{Version: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	var want *unstructured.Unstructured
	for _, crd := range m.CRDs() {
		if crd.GetName() == "syncs.uprev.dev" {
			want = crd
		}
	}
	NewWithT(t).Expect(m.CRDs()).To(HaveLen(8))
	setVersions := func(crd *unstructured.Unstructured, edit func(v map[string]any)) *unstructured.Unstructured {
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		edit(versions[0].(map[string]any))
		_ = unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
		return crd
	}
	for _, tc := range []struct {
		name      string
		installed *unstructured.Unstructured
		want      string
	}{
		{"current", installedCopy(want), ""},
		{"not established", want.DeepCopy(), "not established"},
		{"another version", setVersions(installedCopy(want), func(v map[string]any) { v["name"] = "v1beta1" }),
			"versions v1beta1 (served, storage) installed, this uprev's are v1alpha1 (served, storage)"},
		{"not served", setVersions(installedCopy(want), func(v map[string]any) { v["served"] = false }),
			"versions v1alpha1 (storage) installed, this uprev's are v1alpha1 (served, storage)"},
		{"another schema", setVersions(installedCopy(want), func(v map[string]any) {
			_ = unstructured.SetNestedField(v, "string", "schema", "openAPIV3Schema", "properties", "spec", "properties", "path", "type")
			_ = unstructured.SetNestedField(v, int64(3), "schema", "openAPIV3Schema", "properties", "spec", "properties", "path", "maxLength")
		}), "the schema of v1alpha1 is not this uprev's"},
	} {
		g := NewWithT(t)
		diff, err := CRDDifference(want, tc.installed)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(diff).To(Equal(tc.want), tc.name)
	}
}
