// Command release-manifests writes the install.yaml of a release: what
// config/default installs (CRDs, RBAC, the manager), built by kustomize in
// process, with the manager's image pinned to the release's version. `make
// release` runs it:
//
//	go run ./hack/release-manifests --version v1.2.3 --output dist/install.yaml
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// configImage is the manager's image as config/manager names it.
const configImage = "ghcr.io/uprev-dev/uprev"

// tagPattern is what an OCI image tag may be.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

func main() {
	var (
		version = flag.String("version", "", "The release version, the tag of the manager's image (required), such as the output of `git describe --tags --always --dirty`.")
		image   = flag.String("image", configImage, "The manager's image, without tag: where the release's image is pushed.")
		config  = flag.String("config", "config", "The directory holding config/default and the bases it uses.")
		output  = flag.String("output", "", "The file to write; default: standard output.")
	)
	flag.Parse()
	if err := run(*version, *image, *config, *output); err != nil {
		fmt.Fprintln(os.Stderr, "release-manifests:", err)
		os.Exit(1)
	}
}

// run builds the install.yaml and writes it to output.
func run(version, image, config, output string) error {
	if !tagPattern.MatchString(version) {
		return fmt.Errorf("--version %q is not an image tag", version)
	}
	manifests, err := installManifests(config, image, version)
	if err != nil {
		return err
	}
	out := append([]byte(fmt.Sprintf("# uprev %s: CRDs, RBAC and the manager (%s:%s).\n# Install: kubectl apply -f install.yaml (see docs/install.md).\n", version, image, version)), manifests...)
	if output == "" {
		_, err = os.Stdout.Write(out)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(output), 0o755); err != nil {
		return err
	}
	return os.WriteFile(output, out, 0o644)
}

// installManifests builds config/default of the directory config with
// image:version for the manager, as an overlay on an in-memory copy of it:
// what a user's `kustomize edit set image` would do, without writing to
// the checkout. Objects come in kustomize's legacy order (Namespace and
// CRDs first), so that `kubectl apply -f` creates each before what needs
// it.
func installManifests(config, image, version string) ([]byte, error) {
	mem := filesys.MakeFsInMemory()
	if err := copyTree(mem, config, "/config"); err != nil {
		return nil, err
	}
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../config/default
images:
- name: %s
  newName: %s
  newTag: %q
`, configImage, image, version)
	if err := mem.WriteFile("/release/kustomization.yaml", []byte(overlay)); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	resources, err := krusty.MakeKustomizer(opts).Run(mem, "/release")
	if err != nil {
		return nil, fmt.Errorf("building config/default: %w", err)
	}
	if err := checkImage(resources, image+":"+version); err != nil {
		return nil, err
	}
	return resources.AsYaml()
}

// copyTree copies the files under dir on disk to to in mem.
func copyTree(mem filesys.FileSystem, dir, to string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join(to, filepath.ToSlash(rel)), content)
	})
}

// checkImage fails unless every container of every Deployment in resources
// runs want: an image name that config/ no longer uses would otherwise
// leave `latest` in a release.
func checkImage(resources resmap.ResMap, want string) error {
	deployments := 0
	for _, r := range resources.Resources() {
		if r.GetKind() != "Deployment" {
			continue
		}
		deployments++
		containers, err := r.GetSlice("spec.template.spec.containers")
		if err != nil {
			return fmt.Errorf("reading the containers of Deployment %s: %w", r.GetName(), err)
		}
		for _, c := range containers {
			image, _ := c.(map[string]any)["image"].(string)
			if image != want {
				return fmt.Errorf("Deployment %s runs %q, not %q", r.GetName(), image, want)
			}
		}
	}
	if deployments == 0 {
		return errors.New("config/default holds no Deployment")
	}
	return nil
}
