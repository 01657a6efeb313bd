package apply

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

func TestDriftIsCorrected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objects := manifests(t, map[string]string{
		"cm.yaml":     fmt.Sprintf(configMapYAML, "settings", ns, "wanted"),
		"other.yaml":  fmt.Sprintf(configMapYAML, "untouched", ns, "wanted"),
		"deploy.yaml": fmt.Sprintf(deploymentYAML, "app", ns),
	})
	result, err := testApplier.Apply(ctx, objects, nil, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())

	// Edits made directly in the cluster.
	cm, err := get("v1", "ConfigMap", ns, "settings")
	g.Expect(err).NotTo(HaveOccurred())
	cm.Object["data"] = map[string]any{"key": "edited"}
	g.Expect(k8sClient.Update(ctx, cm)).To(Succeed())
	deploy, err := get("apps/v1", "Deployment", ns, "app")
	g.Expect(err).NotTo(HaveOccurred())
	deploy.Object["spec"].(map[string]any)["replicas"] = int64(5)
	g.Expect(k8sClient.Update(ctx, deploy)).To(Succeed())

	// Reconciling the same set puts them back and says so.
	result, err = testApplier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Configured()).To(ConsistOf(id(ns, "settings", "", "ConfigMap"), id(ns, "app", "apps", "Deployment")))
	g.Expect(result.Unchanged()).To(ConsistOf(id(ns, "untouched", "", "ConfigMap")))

	cm, err = get("v1", "ConfigMap", ns, "settings")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Object["data"]).To(HaveKeyWithValue("key", "wanted"))
	deploy, err = get("apps/v1", "Deployment", ns, "app")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deploy.Object["spec"]).To(HaveKeyWithValue("replicas", int64(1)))

	// Once corrected, nothing drifts any more.
	result, err = testApplier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Changed()).To(BeFalse())
}
