// Package install builds and applies what installs uprev on a cluster:
// config/default (or config/multitenant) as the binary carries it, built by
// kustomize in process, with the manager's image pinned to a version. `uprev
// install`, `uprev check` and `make release` (hack/release-manifests) use it,
// so the three cannot disagree on what an install is.
package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/uprev-dev/uprev/config"
)

const (
	// ConfigImage is the manager's image, without tag, as config/manager
	// names it: where releases are published.
	ConfigImage = "ghcr.io/uprev-dev/uprev"
	// DefaultNamespace is the namespace config/default installs into.
	DefaultNamespace = "uprev-system"
	// FieldManager is the field manager `uprev install` applies as.
	FieldManager = "uprev"
)

// Variants of the install: the config/ directories Options.Variant names.
const (
	// VariantDefault is config/default: one trusted team.
	VariantDefault = "default"
	// VariantMultiTenant is config/multitenant: the multi-tenant lockdown.
	VariantMultiTenant = "multitenant"
)

var (
	// tagPattern is what an OCI image tag may be.
	tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	// digestPattern is a sha256 image digest.
	digestPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	// namespacePattern is a DNS label, what a namespace name may be.
	namespacePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// Options say which install to build.
type Options struct {
	// Variant is VariantDefault (when empty) or VariantMultiTenant.
	Variant string
	// Image is the manager's image: a name, tagged with Version, or a
	// name with its own tag or digest (registry.example.com/uprev:dev,
	// …@sha256:…), used as it is. Empty means ConfigImage.
	Image string
	// Version is the tag of Image when Image has none: the release's.
	Version string
	// Namespace is the namespace to install into; empty means
	// DefaultNamespace.
	Namespace string
}

// Manifests are a built install.
type Manifests struct {
	// Objects are the install's objects, in the order `kubectl apply -f`
	// needs (kustomize's legacy order: the Namespace and CRDs first).
	Objects []*unstructured.Unstructured
	// YAML is Objects as one multi-document YAML stream.
	YAML []byte
	// Image is the manager's image reference the Deployment runs.
	Image string
	// Namespace is the namespace the manager is installed into.
	Namespace string
}

// Build builds the install of opts from the config/ the binary carries, as
// an overlay on an in-memory copy of it: what a user's `kustomize edit set
// image` and `kustomize edit set namespace` would do.
func Build(opts Options) (*Manifests, error) {
	variant := opts.Variant
	if variant == "" {
		variant = VariantDefault
	}
	if variant != VariantDefault && variant != VariantMultiTenant {
		return nil, fmt.Errorf("unknown install variant %q: want %s or %s", variant, VariantDefault, VariantMultiTenant)
	}
	namespace := opts.Namespace
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if !namespacePattern.MatchString(namespace) {
		return nil, fmt.Errorf("namespace %q is not a valid namespace name", namespace)
	}
	image, err := ParseImage(opts.Image, opts.Version)
	if err != nil {
		return nil, err
	}
	mem := filesys.MakeFsInMemory()
	if err := copyConfig(mem); err != nil {
		return nil, err
	}
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../config/%s
namespace: %s
images:
- name: %s
  newName: %s
`, variant, namespace, ConfigImage, image.Name)
	if image.Digest != "" {
		overlay += fmt.Sprintf("  digest: %s\n", image.Digest)
	} else {
		overlay += fmt.Sprintf("  newTag: %q\n", image.Tag)
	}
	if err := mem.WriteFile("/install/kustomization.yaml", []byte(overlay)); err != nil {
		return nil, err
	}
	kopts := krusty.MakeDefaultOptions()
	kopts.Reorder = krusty.ReorderOptionLegacy
	resources, err := krusty.MakeKustomizer(kopts).Run(mem, "/install")
	if err != nil {
		return nil, fmt.Errorf("building config/%s: %w", variant, err)
	}
	if err := checkImage(resources, image.String()); err != nil {
		return nil, err
	}
	yaml, err := resources.AsYaml()
	if err != nil {
		return nil, err
	}
	objects, err := decodeObjects(yaml)
	if err != nil {
		return nil, err
	}
	return &Manifests{Objects: objects, YAML: yaml, Image: image.String(), Namespace: namespace}, nil
}

// decodeObjects decodes a multi-document YAML stream into objects with
// JSON's types, as the API server returns them.
func decodeObjects(stream []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	var objects []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objects, nil
			}
			return nil, fmt.Errorf("decoding the built manifests: %w", err)
		}
		if len(obj.Object) > 0 {
			objects = append(objects, obj)
		}
	}
}

// Image is an image reference split as kustomize's images field takes it.
type Image struct {
	// Name is the repository, with its registry.
	Name string
	// Tag is the tag, when there is no Digest.
	Tag string
	// Digest is the digest, sha256:….
	Digest string
}

// String returns the reference: name:tag or name@digest.
func (i Image) String() string {
	if i.Digest != "" {
		return i.Name + "@" + i.Digest
	}
	return i.Name + ":" + i.Tag
}

// ParseImage reads ref (empty means ConfigImage) as an image name with an
// optional tag or digest; without either, version is its tag.
func ParseImage(ref, version string) (Image, error) {
	if ref == "" {
		ref = ConfigImage
	}
	var img Image
	name, digest, hasDigest := strings.Cut(ref, "@")
	switch {
	case hasDigest:
		if !digestPattern.MatchString(digest) {
			return Image{}, fmt.Errorf("image %q: %q is not a sha256 digest", ref, digest)
		}
		img = Image{Name: name, Digest: digest}
	case strings.LastIndex(ref, ":") > strings.LastIndex(ref, "/"):
		i := strings.LastIndex(ref, ":")
		img = Image{Name: ref[:i], Tag: ref[i+1:]}
	default:
		img = Image{Name: ref, Tag: version}
	}
	if img.Name == "" || strings.ContainsAny(img.Name, " \t\n\"'") {
		return Image{}, fmt.Errorf("image %q has no valid name", ref)
	}
	if img.Digest == "" && !tagPattern.MatchString(img.Tag) {
		return Image{}, fmt.Errorf("%q is not an image tag: give a released version (such as v0.1.0), or an image with its tag", img.Tag)
	}
	return img, nil
}

// copyConfig copies the config/ the binary carries to /config in mem.
func copyConfig(mem filesys.FileSystem) error {
	return fs.WalkDir(config.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := config.FS.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/config", p), content)
	})
}

// checkImage fails unless every container of every Deployment in resources
// runs want: an image name that config/ no longer uses would otherwise
// leave another version in an install.
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
				return fmt.Errorf("the Deployment %s runs %q, not %q", r.GetName(), image, want)
			}
		}
	}
	if deployments == 0 {
		return errors.New("config holds no Deployment")
	}
	return nil
}
