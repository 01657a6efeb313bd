package apply

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Component is one container image as a manifest names it: the repository
// as written, the tag and the digest (each empty when not given).
type Component struct {
	// Image is the image repository, without tag or digest.
	Image string
	// Tag is the image's tag.
	Tag string
	// Digest is the digest the manifest pins (sha256:...).
	Digest string
}

// podSpecPaths are where objects keep a pod spec: a CronJob's job template,
// the pod template of Deployments, StatefulSets, DaemonSets, ReplicaSets,
// Jobs (and of custom kinds that follow the same shape), and a Pod's own
// spec. The first path an object has is used.
var podSpecPaths = [][]string{
	{"spec", "jobTemplate", "spec", "template", "spec"},
	{"spec", "template", "spec"},
}

// containerLists are the lists of containers of a pod spec whose images a
// pod runs.
var containerLists = []string{"initContainers", "containers"}

// AppliedComponents returns the container images of the objects res wrote
// or found unchanged, as their manifests name them: objects it skipped
// (annotated uprev.dev/reconcile: disabled) run whatever the cluster
// holds. Objects without a namespace were applied in defaultNamespace.
// There is one entry per image, tag and digest, sorted, at most limit of
// them; omitted counts the entries left out. Images that are not valid
// references are left out and not counted.
func AppliedComponents(objects []*unstructured.Unstructured, res Result, defaultNamespace string, limit int) (components []Component, omitted int) {
	skipped := map[string]bool{}
	for _, id := range res.Skipped() {
		skipped[id] = true
	}
	seen := map[Component]bool{}
	for _, o := range objects {
		id := object.UnstructuredToObjMetadata(o)
		if id.Namespace == "" {
			id.Namespace = defaultNamespace
		}
		if skipped[id.String()] {
			continue
		}
		for _, image := range imagesOf(o) {
			c, err := ParseImage(image)
			if err != nil || seen[c] {
				continue
			}
			seen[c] = true
			components = append(components, c)
		}
	}
	slices.SortFunc(components, func(a, b Component) int {
		return cmp.Or(strings.Compare(a.Image, b.Image), strings.Compare(a.Tag, b.Tag), strings.Compare(a.Digest, b.Digest))
	})
	if len(components) > limit {
		omitted = len(components) - limit
		components = components[:limit]
	}
	return components, omitted
}

// imagesOf returns the image of every container of an object's pod spec.
func imagesOf(o *unstructured.Unstructured) []string {
	spec, ok := podSpecOf(o)
	if !ok {
		return nil
	}
	var images []string
	for _, list := range containerLists {
		containers, _, _ := unstructured.NestedSlice(spec, list)
		for _, c := range containers {
			container, ok := c.(map[string]any)
			if !ok {
				continue
			}
			if image, ok := container["image"].(string); ok && image != "" {
				images = append(images, image)
			}
		}
	}
	return images
}

// podSpecOf returns the pod spec of an object, if it has one.
func podSpecOf(o *unstructured.Unstructured) (map[string]any, bool) {
	if o.GetKind() == "Pod" && o.GroupVersionKind().Group == "" {
		spec, ok, _ := unstructured.NestedMap(o.Object, "spec")
		return spec, ok
	}
	for _, path := range podSpecPaths {
		if spec, ok, _ := unstructured.NestedMap(o.Object, path...); ok {
			return spec, true
		}
	}
	return nil, false
}

// ParseImage splits an image reference as a manifest writes it,
// `repository[:tag][@digest]`, into its parts, keeping the repository as
// written. A reference that is not valid is an error.
func ParseImage(ref string) (Component, error) {
	if _, err := name.ParseReference(ref); err != nil {
		return Component{}, fmt.Errorf("parsing image %q: %w", ref, err)
	}
	base, digest, _ := strings.Cut(ref, "@")
	c := Component{Image: base, Digest: digest}
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		c.Image, c.Tag = base[:i], base[i+1:]
	}
	return c, nil
}
