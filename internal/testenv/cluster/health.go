package cluster

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MarkDeploymentAvailable sets the status the deployment controller and
// kubelets would: no controller-manager or kubelet runs with these control
// planes, so a test plays their part and makes Deployment namespace/name, at
// its current generation, healthy for kstatus.
func MarkDeploymentAvailable(ctx context.Context, c client.Client, namespace, name string) error {
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &d); err != nil {
		return fmt.Errorf("reading Deployment %s/%s: %w", namespace, name, err)
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	if err := c.Status().Update(ctx, &d); err != nil {
		return fmt.Errorf("marking Deployment %s/%s available: %w", namespace, name, err)
	}
	return nil
}
