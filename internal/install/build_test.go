package install

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// deploymentArgs returns the args of the manager container of m.
func deploymentArgs(g Gomega, m *Manifests) []string {
	for _, obj := range m.Objects {
		if obj.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			return args
		}
	}
	g.Expect("a Deployment").To(BeEmpty())
	return nil
}

func TestBuildPinsTheImage(t *testing.T) {
	for _, tc := range []struct {
		image, version, want string
	}{
		{"", "v1.2.3", "ghcr.io/uprev-dev/uprev:v1.2.3"},
		{"registry.example.com/platform/uprev", "v1.2.3", "registry.example.com/platform/uprev:v1.2.3"},
		{"uprev:dev", "v1.2.3", "uprev:dev"},
		{"localhost:5000/uprev", "v1.2.3", "localhost:5000/uprev:v1.2.3"},
		{"localhost:5000/uprev:rc1", "", "localhost:5000/uprev:rc1"},
		{"ghcr.io/uprev-dev/uprev@sha256:" + strings.Repeat("ab", 32), "v1.2.3", "ghcr.io/uprev-dev/uprev@sha256:" + strings.Repeat("ab", 32)},
	} {
		g := NewWithT(t)
		m, err := Build(Options{Image: tc.image, Version: tc.version})
		g.Expect(err).NotTo(HaveOccurred(), tc.image)
		g.Expect(m.Image).To(Equal(tc.want))
		g.Expect(string(m.YAML)).To(ContainSubstring("image: " + tc.want + "\n"))
		g.Expect(string(m.YAML)).NotTo(ContainSubstring("uprev:v0.1.0"), "config/manager's own tag is replaced")
	}
}

func TestBuildRefusesWhatIsNoImage(t *testing.T) {
	for _, tc := range []struct{ image, version, want string }{
		{"", "(devel)", `"(devel)" is not an image tag`},
		{"", "", `"" is not an image tag`},
		{"uprev@sha256:abc", "", "is not a sha256 digest"},
		{":v1", "", "has no valid name"},
	} {
		g := NewWithT(t)
		_, err := Build(Options{Image: tc.image, Version: tc.version})
		g.Expect(err).To(MatchError(ContainSubstring(tc.want)), tc.image+" "+tc.version)
	}
	_, err := Build(Options{Version: "v1", Variant: "pull"})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring(`unknown install variant "pull"`)))
	_, err = Build(Options{Version: "v1", Namespace: "Not_A_Namespace"})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("not a valid namespace name")))
}

func TestBuildInAnotherNamespace(t *testing.T) {
	g := NewWithT(t)
	m, err := Build(Options{Version: "v1.2.3", Namespace: "platform-uprev"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Namespace).To(Equal("platform-uprev"))
	g.Expect(string(m.YAML)).NotTo(ContainSubstring(DefaultNamespace))
	g.Expect(m.Objects[0].GetKind()).To(Equal("Namespace"))
	g.Expect(m.Objects[0].GetName()).To(Equal("platform-uprev"))
	g.Expect(m.Objects[0].GetLabels()).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
	subjects := 0
	for _, obj := range m.Objects {
		if obj.GetKind() == "ServiceAccount" || obj.GetKind() == "Deployment" || obj.GetKind() == "Service" || obj.GetKind() == "Role" || obj.GetKind() == "RoleBinding" {
			g.Expect(obj.GetNamespace()).To(Equal("platform-uprev"), obj.GetKind()+" "+obj.GetName())
		}
		list, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
		for _, s := range list {
			subjects++
			g.Expect(s).To(HaveKeyWithValue("namespace", "platform-uprev"), obj.GetKind()+" "+obj.GetName())
		}
	}
	g.Expect(subjects).To(BeNumerically(">=", 6))
}

func TestBuildMultiTenant(t *testing.T) {
	g := NewWithT(t)
	def, err := Build(Options{Version: "v1.2.3"})
	g.Expect(err).NotTo(HaveOccurred())
	mt, err := Build(Options{Version: "v1.2.3", Variant: VariantMultiTenant})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deploymentArgs(g, mt)).To(Equal(append(deploymentArgs(g, def), "--default-service-account=default", "--no-cross-namespace-refs")))
	names := func(m *Manifests) []string {
		var out []string
		for _, obj := range m.Objects {
			out = append(out, obj.GetKind()+"/"+obj.GetName())
		}
		return out
	}
	g.Expect(names(def)).To(ContainElements("ClusterRole/uprev-sync-apply", "ClusterRoleBinding/uprev-sync-impersonate"))
	g.Expect(names(mt)).NotTo(ContainElements("ClusterRole/uprev-sync-apply", "ClusterRoleBinding/uprev-sync-apply", "ClusterRoleBinding/uprev-sync-impersonate", "ClusterRoleBinding/uprev-workload-identity"))
	g.Expect(names(mt)).To(ContainElement("ClusterRole/uprev-sync-impersonate"))
}
