package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// releaseVersion is the version the release tests stamp in.
const releaseVersion = "v9.8.7-rc.1-3-gabcdef0-dirty"

// runMake runs make with args at the repository root, failing the test
// when it fails.
func runMake(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "make", append([]string{"--no-print-directory"}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// objectKey names an object in a manifest set.
func objectKey(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// TestReleaseInstallYAML builds dist/install.yaml the way `make release`
// does, and checks that it is config/default with the manager's image
// pinned to the release's version, every CRD included, and that it
// installs on a fresh cluster with one `kubectl apply -f`.
func TestReleaseInstallYAML(t *testing.T) {
	g := NewWithT(t)
	k := newKubectl(t, "")
	dist := t.TempDir()
	runMake(t, k.root, "release-manifests", "VERSION="+releaseVersion, "DIST="+dist)
	installYAML := filepath.Join(dist, "install.yaml")
	content, err := os.ReadFile(installYAML)
	g.Expect(err).NotTo(HaveOccurred())
	released, err := decodeObjects(string(content))
	g.Expect(err).NotTo(HaveOccurred())
	image := "ghcr.io/uprev-dev/uprev:" + releaseVersion

	// The same objects as config/default, in an order kubectl can apply
	// (the Namespace first), the image alone changed.
	g.Expect(released[0].GetKind()).To(Equal("Namespace"))
	want := map[string]*unstructured.Unstructured{}
	for _, obj := range k.build("config/default") {
		want[objectKey(obj)] = obj
	}
	g.Expect(released).To(HaveLen(len(want)))
	for _, obj := range released {
		key := objectKey(obj)
		g.Expect(want).To(HaveKey(key))
		expected := want[key]
		if obj.GetKind() == "Deployment" {
			var dep appsv1.Deployment
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &dep)).To(Succeed())
			g.Expect(dep.Spec.Template.Spec.Containers).To(HaveEach(HaveField("Image", image)))
			containers, _, _ := unstructured.NestedSlice(expected.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				c.(map[string]any)["image"] = image
			}
			g.Expect(unstructured.SetNestedSlice(expected.Object, containers, "spec", "template", "spec", "containers")).To(Succeed())
		}
		g.Expect(obj.Object).To(Equal(expected.Object), key)
	}

	// Every CRD of config/crd/bases, by name.
	var crds []string
	for _, obj := range released {
		if obj.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, obj.GetName())
		}
	}
	bases, err := filepath.Glob(filepath.Join(k.root, "config", "crd", "bases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var wantCRDs []string
	for _, base := range bases {
		// Files are named <group>_<plural>.yaml, CRDs <plural>.<group>.
		group, plural, _ := strings.Cut(strings.TrimSuffix(filepath.Base(base), ".yaml"), "_")
		wantCRDs = append(wantCRDs, plural+"."+group)
	}
	g.Expect(wantCRDs).To(HaveLen(8))
	g.Expect(crds).To(ConsistOf(wantCRDs))

	// One apply on a fresh cluster installs it all; a server-side dry run
	// of it again then changes nothing.
	c := cluster.StartT(t)
	k, _ = kubectlOn(t, c)
	out, _ := k.run("apply", "-f", installYAML)
	g.Expect(out).To(ContainSubstring("namespace/" + namespace + " created"))
	g.Expect(out).To(ContainSubstring("deployment.apps/uprev created"))
	out, stderr := k.run("apply", "-f", installYAML, "--dry-run=server")
	g.Expect(stderr).To(BeEmpty())
	g.Expect(out).To(Equal(sameLines(out, regexp.MustCompile(` unchanged \(server dry run\)$`))), "every object unchanged")

	cl, err := client.New(c.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	var dep appsv1.Deployment
	g.Expect(cl.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "uprev"}, &dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
}

// TestReleaseVersion builds uprev as `make build` does, with the version
// stamped in as `make release` stamps it, and shows that the binary
// reports it, and that its help exits 0 without starting the manager.
func TestReleaseVersion(t *testing.T) {
	g := NewWithT(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	g.Expect(err).NotTo(HaveOccurred())
	bin := t.TempDir()
	runMake(t, root, "build", "VERSION="+releaseVersion, "BIN="+bin)

	out, err := exec.CommandContext(t.Context(), filepath.Join(bin, "uprev"), "version").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(Equal(releaseVersion + "\n"))

	out, err = exec.CommandContext(t.Context(), filepath.Join(bin, "uprev"), "-h").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("release-hold"))
}
