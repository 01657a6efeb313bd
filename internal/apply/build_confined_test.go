package apply

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// checkoutBeside returns a checkout directory and, next to it, a directory
// outside it that holds a manifest and a kustomization: what a symbolic
// link of the checkout must never reach.
func checkoutBeside(t *testing.T) (checkout, outside string) {
	t.Helper()
	parent := t.TempDir()
	checkout, outside = filepath.Join(parent, "checkout"), filepath.Join(parent, "outside")
	for _, dir := range []string{checkout, filepath.Join(outside, "app")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	manifest := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: outside, namespace: x}\n")
	for name, data := range map[string][]byte{
		"cm.yaml":                manifest,
		"app/cm.yaml":            manifest,
		"app/kustomization.yaml": []byte("resources: [cm.yaml]\n"),
	} {
		if err := os.WriteFile(filepath.Join(outside, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(checkout, "inside.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: inside, namespace: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return checkout, outside
}

// TestBuildPathMustStayInCheckout shows that a Sync path that leaves the
// checkout, or does not exist, is a build error naming the path, never an
// empty revision (which prune would take as "delete everything").
func TestBuildPathMustStayInCheckout(t *testing.T) {
	tests := []struct {
		name string
		// link, when set, is made a symbolic link in the checkout to
		// target (with OUTSIDE replaced by the outside directory).
		link, target string
		path         string
	}{
		{name: "absolute symlink", link: "deploy", target: "OUTSIDE", path: "deploy"},
		{name: "relative symlink", link: "deploy", target: "../outside", path: "deploy"},
		{name: "relative symlink to a kustomization", link: "deploy", target: "../outside/app", path: "deploy"},
		{name: "symlink as a parent of the path", link: "deploy", target: "../outside", path: "deploy/app"},
		{name: "symlink to a file", link: "deploy", target: "../outside/cm.yaml", path: "deploy"},
		{name: "dot-dot", path: "../outside"},
		{name: "dot-dot inside the path", path: "sub/../../outside"},
		{name: "missing", path: "does-not-exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			checkout, outside := checkoutBeside(t)
			if tt.link != "" {
				target := tt.target
				if target == "OUTSIDE" {
					target = outside
				}
				g.Expect(os.Symlink(target, filepath.Join(checkout, tt.link))).To(Succeed())
			}
			objects, err := BuildWithin(checkout, tt.path)
			g.Expect(objects).To(BeEmpty(), "nothing outside the checkout is read")
			var buildErr *BuildError
			g.Expect(errors.As(err, &buildErr)).To(BeTrue(), "an error, never an empty revision; got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.path))
			g.Expect(err.Error()).NotTo(ContainSubstring(outside), "the error names the path as written")
		})
	}
}

// TestBuildFollowsLinksInsideCheckout shows that symbolic links that stay
// in the checkout still build: as the Sync path, as a plain file, and as a
// kustomize base.
func TestBuildFollowsLinksInsideCheckout(t *testing.T) {
	g := NewWithT(t)
	checkout := writeDir(t, map[string]string{
		"apps/prod/cm.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: prod, namespace: x}\n",
		"shared/extra.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: x}\n",
		"base/kustomization.yaml":    "resources: [app.yaml]\n",
		"base/app.yaml":              "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: x}\n",
		"overlay/kustomization.yaml": "resources: [linked-base]\nnamePrefix: o-\n",
	})
	g.Expect(os.Symlink("apps/prod", filepath.Join(checkout, "current"))).To(Succeed())
	g.Expect(os.Symlink("../../shared/extra.yaml", filepath.Join(checkout, "apps", "prod", "extra.yaml"))).To(Succeed())
	g.Expect(os.Symlink("../base", filepath.Join(checkout, "overlay", "linked-base"))).To(Succeed())

	objects, err := BuildWithin(checkout, "current")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(objects)).To(ConsistOf("ConfigMap/prod", "ConfigMap/extra"))

	objects, err = BuildWithin(checkout, "overlay")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(objects)).To(ConsistOf("ConfigMap/o-app"))
}

// TestBuildRefusesLinksOutOfCheckout shows that a link further down, to a
// file or a directory outside the checkout, fails the build whether plain
// YAML or kustomize reads it.
func TestBuildRefusesLinksOutOfCheckout(t *testing.T) {
	tests := []struct {
		name          string
		link, target  string
		kustomization string
	}{
		{name: "plain YAML, relative link to a file", link: "deploy/leak.yaml", target: "../../outside/cm.yaml"},
		{name: "kustomize resource, relative link to a file", link: "deploy/leak.yaml", target: "../../outside/cm.yaml", kustomization: "resources: [leak.yaml]\n"},
		{name: "kustomize base, relative link to a directory", link: "deploy/base", target: "../../outside/app", kustomization: "resources: [base]\n"},
		{name: "kustomize generator file, absolute link", link: "deploy/data.txt", target: "OUTSIDE/cm.yaml", kustomization: "configMapGenerator:\n- name: leak\n  files: [data.txt]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			checkout, outside := checkoutBeside(t)
			g.Expect(os.MkdirAll(filepath.Join(checkout, "deploy"), 0o755)).To(Succeed())
			if tt.kustomization != "" {
				g.Expect(os.WriteFile(filepath.Join(checkout, "deploy", "kustomization.yaml"), []byte(tt.kustomization), 0o644)).To(Succeed())
			}
			target := tt.target
			if len(target) > 7 && target[:7] == "OUTSIDE" {
				target = outside + target[7:]
			}
			g.Expect(os.Symlink(target, filepath.Join(checkout, tt.link))).To(Succeed())
			objects, err := BuildWithin(checkout, "deploy")
			g.Expect(objects).To(BeEmpty())
			var buildErr *BuildError
			g.Expect(errors.As(err, &buildErr)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(filepath.Base(tt.link)))
		})
	}
}
