package apply

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// markDeploymentAvailable writes the status the Deployment controller and
// kubelet would write once every replica runs. envtest runs neither, so no
// Deployment ever becomes ready on its own: the tests simulate health with
// this status update.
func markDeploymentAvailable(g Gomega, namespace, name string) {
	deploy, err := get("apps/v1", "Deployment", namespace, name)
	g.Expect(err).NotTo(HaveOccurred())
	deploy.Object["status"] = map[string]any{
		"observedGeneration": deploy.GetGeneration(),
		"replicas":           int64(1),
		"updatedReplicas":    int64(1),
		"readyReplicas":      int64(1),
		"availableReplicas":  int64(1),
		"conditions": []any{
			map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
			map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
		},
	}
	g.Expect(k8sClient.Status().Update(context.Background(), deploy)).To(Succeed())
}

func TestWaitForHealth(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objects := manifests(t, map[string]string{
		"deploy.yaml": fmt.Sprintf(deploymentYAML, "app", ns),
		"cm.yaml":     fmt.Sprintf(configMapYAML, "settings", ns, "a"),
	})

	type outcome struct {
		result Result
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		result, err := testApplier.Apply(ctx, objects, nil, Options{Owner: testOwner, Wait: true, Timeout: time.Minute})
		done <- outcome{result, err}
	}()

	// While Apply waits, the Deployment rolls out.
	g.Eventually(func(g Gomega) { markDeploymentAvailable(g, ns, "app") }).Should(Succeed())
	var got outcome
	g.Eventually(done).WithTimeout(30 * time.Second).Should(Receive(&got))
	g.Expect(got.err).NotTo(HaveOccurred())
	g.Expect(got.result.Health).To(Equal(HealthHealthy))
	g.Expect(got.result.Created()).To(HaveLen(2))
}

func TestWaitTimeoutNamesUnhealthyObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	group := uniqueName("w") + ".uprev.test"
	objects := manifests(t, map[string]string{
		"crd.yaml":    fmt.Sprintf(crdYAML, group),
		"widget.yaml": fmt.Sprintf(widgetYAML, group, "unready", ns, 1),
		"deploy.yaml": fmt.Sprintf(deploymentYAML, "app", ns),
		"cm.yaml":     fmt.Sprintf(configMapYAML, "settings", ns, "a"),
	})
	result, err := testApplier.Apply(ctx, objects, nil, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())

	// The custom resource reports itself not Ready.
	widget, err := get(group+"/v1", "Widget", ns, "unready")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(unstructured.SetNestedSlice(widget.Object, []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "Provisioning", "message": "waiting for capacity"},
	}, "status", "conditions")).To(Succeed())
	g.Expect(k8sClient.Status().Update(ctx, widget)).To(Succeed())

	// No status is written for the Deployment: it never becomes ready.
	start := time.Now()
	result, err = testApplier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Wait: true, Timeout: 2 * time.Second})
	g.Expect(time.Since(start)).To(BeNumerically("<", 20*time.Second))
	var healthErr *HealthError
	g.Expect(errors.As(err, &healthErr)).To(BeTrue(), "got %v", err)
	unhealthy := map[string]string{}
	for _, s := range healthErr.Unhealthy {
		unhealthy[s.ID] = s.Status + ": " + s.Message
	}
	g.Expect(unhealthy).To(HaveLen(2))
	g.Expect(unhealthy).To(HaveKeyWithValue(id(ns, "app", "apps", "Deployment"), ContainSubstring("InProgress")))
	g.Expect(unhealthy).To(HaveKeyWithValue(id(ns, "unready", group, "Widget"), ContainSubstring("waiting for capacity")))
	g.Expect(err.Error()).To(ContainSubstring("Deployment/" + ns + "/app"))
	g.Expect(result.Health).To(Equal(HealthUnhealthy))
	g.Expect(result.Inventory).To(HaveLen(4), "the set was applied; its inventory is kept")

	// Once the Deployment is available and the Widget Ready, the wait passes.
	g.Eventually(func(g Gomega) { markDeploymentAvailable(g, ns, "app") }).Should(Succeed())
	widget, err = get(group+"/v1", "Widget", ns, "unready")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(unstructured.SetNestedSlice(widget.Object, []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Ready"},
	}, "status", "conditions")).To(Succeed())
	g.Expect(k8sClient.Status().Update(ctx, widget)).To(Succeed())
	result, err = testApplier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, Wait: true, Timeout: 30 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Health).To(Equal(HealthHealthy))
}
