package apply

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testOwner is the Owner the package's tests apply as.
var testOwner = Owner{Name: "apps", Namespace: "team"}

// TestPruneDeletesOnlyTheOwnersObjects: an inventory that names objects
// the owner never applied (created by someone else, or applied for another
// owner) deletes none of them; the owner's own objects are pruned.
func TestPruneDeletesOnlyTheOwnersObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, other := newNamespace(t), newNamespace(t)

	// Someone else's ConfigMap, and one applied for another owner.
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "theirs"}}
	g.Expect(k8sClient.Create(ctx, theirs)).To(Succeed())
	_, err := testApplier.Apply(ctx, manifests(t, map[string]string{"a.yaml": fmt.Sprintf(configMapYAML, "other-owner", other, "1")}),
		nil, Options{Owner: Owner{Name: "apps", Namespace: "another-team"}})
	g.Expect(err).NotTo(HaveOccurred())

	mine := manifests(t, map[string]string{
		"a.yaml": fmt.Sprintf(configMapYAML, "a", ns, "1"),
		"b.yaml": fmt.Sprintf(configMapYAML, "b", ns, "1"),
	})
	result, err := testApplier.Apply(ctx, mine, nil, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())
	a, err := get("v1", "ConfigMap", ns, "a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.GetLabels()).To(And(HaveKeyWithValue(OwnerNameLabel, "apps"), HaveKeyWithValue(OwnerNamespaceLabel, "team")))

	// A forged inventory: the owner's objects and the two others'.
	forged := append(result.Inventory,
		Entry{ID: id(other, "theirs", "", "ConfigMap"), Version: "v1"},
		Entry{ID: id(other, "other-owner", "", "ConfigMap"), Version: "v1"})
	result, err = testApplier.Apply(ctx, mine[:1], forged, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Deleted()).To(ConsistOf(id(ns, "b", "", "ConfigMap")))
	g.Expect(result.Skipped()).To(ConsistOf(id(other, "theirs", "", "ConfigMap"), id(other, "other-owner", "", "ConfigMap")))
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(theirs), &corev1.ConfigMap{})).To(Succeed())
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: other, Name: "other-owner"}, &corev1.ConfigMap{})).To(Succeed())
	_, err = get("v1", "ConfigMap", ns, "b")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)

	// Delete, as a deleted Sync does, is held to the same rule.
	_, err = testApplier.Delete(ctx, forged, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(theirs), &corev1.ConfigMap{})).To(Succeed())
	_, err = get("v1", "ConfigMap", ns, "a")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)

	// Without an owner, nothing is pruned.
	_, err = testApplier.Delete(ctx, forged, Options{})
	g.Expect(err).To(MatchError(ErrNoOwner))
}

// TestPruneDeletesObjectsOfEarlierVersions: an object applied by an uprev
// that set no owner labels (server-side applied as field manager "uprev")
// is still pruned, while one that nobody applied is not.
func TestPruneDeletesObjectsOfEarlierVersions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	legacy := manifests(t, map[string]string{"a.yaml": fmt.Sprintf(configMapYAML, "legacy", ns, "1")})[0]
	g.Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(legacy), client.FieldOwner(FieldManager), client.ForceOwnership)).To(Succeed())
	created := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "created"}}
	g.Expect(k8sClient.Create(ctx, created, client.FieldOwner(FieldManager))).To(Succeed())

	inventory := []Entry{{ID: id(ns, "legacy", "", "ConfigMap"), Version: "v1"}, {ID: id(ns, "created", "", "ConfigMap"), Version: "v1"}}
	result, err := testApplier.Delete(ctx, inventory, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Deleted()).To(ConsistOf(id(ns, "legacy", "", "ConfigMap")))
	g.Expect(result.Skipped()).To(ConsistOf(id(ns, "created", "", "ConfigMap")))
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(created), &corev1.ConfigMap{})).To(Succeed())
}
