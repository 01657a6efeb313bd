package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// addFinalizer puts uprev's finalizer on obj before anything else is done.
func addFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	if controllerutil.ContainsFinalizer(obj, uprevv1.Finalizer) {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	controllerutil.AddFinalizer(obj, uprevv1.Finalizer)
	if err := c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

// removeFinalizer lets the API server delete obj.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	if !controllerutil.RemoveFinalizer(obj, uprevv1.Finalizer) {
		return nil
	}
	if err := c.Patch(ctx, obj, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing finalizer: %w", err))
	}
	return nil
}

// cloneOwner is the owner, in the clone cache, of the object key of kind.
func cloneOwner(kind string, key types.NamespacedName) string {
	return kind + "/" + key.String()
}
