package fleet

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

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

// ComponentsOf returns the container images of objects, as their manifests
// name them: one entry per image, tag and digest, sorted, at most
// uprevv1.MaxTargetComponents of them. omitted counts the entries left out;
// images that are not valid references are left out and not counted.
func ComponentsOf(objects []*unstructured.Unstructured) (components []uprevv1.AppliedComponent, omitted int) {
	seen := map[uprevv1.AppliedComponent]bool{}
	for _, o := range objects {
		for _, image := range imagesOf(o) {
			c, err := ParseImage(image)
			if err != nil || seen[c] {
				continue
			}
			seen[c] = true
			components = append(components, c)
		}
	}
	slices.SortFunc(components, compareComponents)
	if len(components) > uprevv1.MaxTargetComponents {
		omitted = len(components) - uprevv1.MaxTargetComponents
		components = components[:uprevv1.MaxTargetComponents]
	}
	return components, omitted
}

// compareComponents orders components by image, tag, then digest.
func compareComponents(a, b uprevv1.AppliedComponent) int {
	return cmp.Or(strings.Compare(a.Image, b.Image), strings.Compare(a.Tag, b.Tag), strings.Compare(a.Digest, b.Digest))
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
func ParseImage(ref string) (uprevv1.AppliedComponent, error) {
	if _, err := name.ParseReference(ref); err != nil {
		return uprevv1.AppliedComponent{}, fmt.Errorf("parsing image %q: %w", ref, err)
	}
	base, digest, _ := strings.Cut(ref, "@")
	c := uprevv1.AppliedComponent{Image: base, Digest: digest}
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		c.Image, c.Tag = base[:i], base[i+1:]
	}
	return c, nil
}
