package apply

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestChangeAndRemoveObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	first := manifests(t, map[string]string{
		"a.yaml":      fmt.Sprintf(configMapYAML, "a", ns, "1"),
		"b.yaml":      fmt.Sprintf(configMapYAML, "b", ns, "1"),
		"deploy.yaml": fmt.Sprintf(deploymentYAML, "app", ns),
	})
	result, err := testApplier.Apply(ctx, first, nil, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Created()).To(HaveLen(3))

	// a changes, b and the Deployment leave the set.
	second := manifests(t, map[string]string{"a.yaml": fmt.Sprintf(configMapYAML, "a", ns, "2")})
	result, err = testApplier.Apply(ctx, second, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Configured()).To(ConsistOf(id(ns, "a", "", "ConfigMap")))
	g.Expect(result.Deleted()).To(ConsistOf(id(ns, "b", "", "ConfigMap"), id(ns, "app", "apps", "Deployment")))
	g.Expect(result.Inventory).To(Equal([]Entry{{ID: id(ns, "a", "", "ConfigMap"), Version: "v1"}}))

	a, err := get("v1", "ConfigMap", ns, "a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Object["data"]).To(HaveKeyWithValue("key", "2"))
	_, err = get("v1", "ConfigMap", ns, "b")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	_, err = get("apps/v1", "Deployment", ns, "app")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)

	// Without Prune, objects that leave the set stay.
	third := manifests(t, map[string]string{"b.yaml": fmt.Sprintf(configMapYAML, "b", ns, "1")})
	result, err = testApplier.Apply(ctx, third, result.Inventory, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Deleted()).To(BeEmpty())
	_, err = get("v1", "ConfigMap", ns, "a")
	g.Expect(err).NotTo(HaveOccurred())
}

func TestCRDsAndNamespacesArePrunedOnlyWhenAnnotated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	kept, pruned := uniqueName("kept")+".uprev.test", uniqueName("pruned")+".uprev.test"
	keptNS, prunedNS := uniqueName("kept"), uniqueName("pruned")
	objects := manifests(t, map[string]string{
		"kept.yaml": fmt.Sprintf(crdYAML, kept),
		"pruned.yaml": fmt.Sprintf(crdYAML, pruned) +
			"---\napiVersion: " + pruned + "/v1\nkind: Widget\nmetadata: {name: w, namespace: " + prunedNS + "}\nspec: {size: 1}\n",
		"ns.yaml": fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n---\n"+
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: %s, annotations: {uprev.dev/prune: enabled}}\n", keptNS, prunedNS),
	})
	for _, o := range objects {
		if o.GetName() == "widgets."+pruned {
			o.SetAnnotations(map[string]string{PruneAnnotation: EnabledValue})
		}
	}
	result, err := testApplier.Apply(ctx, objects, nil, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Created()).To(HaveLen(5))

	result, err = testApplier.Apply(ctx, nil, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Deleted()).To(ConsistOf(
		id(prunedNS, "w", pruned, "Widget"),
		id("", "widgets."+pruned, "apiextensions.k8s.io", "CustomResourceDefinition"),
		id("", prunedNS, "", "Namespace"),
	))
	g.Expect(result.Skipped()).To(ConsistOf(
		id("", "widgets."+kept, "apiextensions.k8s.io", "CustomResourceDefinition"),
		id("", keptNS, "", "Namespace"),
	))
	g.Expect(result.Inventory).To(BeEmpty())

	_, err = get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets."+kept)
	g.Expect(err).NotTo(HaveOccurred(), "a CRD without the annotation is not pruned")
	_, err = get("v1", "Namespace", "", keptNS)
	g.Expect(err).NotTo(HaveOccurred(), "a Namespace without the annotation is not pruned")
	g.Eventually(func() bool {
		_, err := get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets."+pruned)
		return apierrors.IsNotFound(err)
	}).Should(BeTrue(), "the annotated CRD is pruned")
	// envtest runs no namespace controller, so a deleted Namespace stays
	// Terminating instead of disappearing.
	ns, err := get("v1", "Namespace", "", prunedNS)
	g.Expect(apierrors.IsNotFound(err) || ns.GetDeletionTimestamp() != nil).To(BeTrue(), "the annotated Namespace is pruned")
}

func TestReconcileDisabledObjectIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objects := manifests(t, map[string]string{
		"a.yaml": fmt.Sprintf(configMapYAML, "held", ns, "1"),
		"b.yaml": fmt.Sprintf(configMapYAML, "other", ns, "1"),
	})
	result, err := testApplier.Apply(ctx, objects, nil, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())

	// Someone marks the object in the cluster and edits it.
	held, err := get("v1", "ConfigMap", ns, "held")
	g.Expect(err).NotTo(HaveOccurred())
	held.SetAnnotations(map[string]string{ReconcileAnnotation: DisabledValue})
	held.Object["data"] = map[string]any{"key": "edited"}
	g.Expect(k8sClient.Update(ctx, held)).To(Succeed())

	// A new revision changes it: it is not changed back.
	changed := manifests(t, map[string]string{
		"a.yaml": fmt.Sprintf(configMapYAML, "held", ns, "2"),
		"b.yaml": fmt.Sprintf(configMapYAML, "other", ns, "2"),
	})
	result, err = testApplier.Apply(ctx, changed, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Skipped()).To(ConsistOf(id(ns, "held", "", "ConfigMap")))
	g.Expect(result.Configured()).To(ConsistOf(id(ns, "other", "", "ConfigMap")))
	held, err = get("v1", "ConfigMap", ns, "held")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(held.Object["data"]).To(HaveKeyWithValue("key", "edited"))

	// A revision without it does not prune it.
	rest := manifests(t, map[string]string{"b.yaml": fmt.Sprintf(configMapYAML, "other", ns, "2")})
	result, err = testApplier.Apply(ctx, rest, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Skipped()).To(ConsistOf(id(ns, "held", "", "ConfigMap")))
	g.Expect(result.Deleted()).To(BeEmpty())
	_, err = get("v1", "ConfigMap", ns, "held")
	g.Expect(err).NotTo(HaveOccurred())
}
