package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// addFinalizer puts the finalizer (uprevv1.Finalizer, or Flux's on Flux's
// kinds) on obj before anything else is done.
func addFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	controllerutil.AddFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

// removeFinalizer takes the finalizer off obj, which lets the API server
// delete it.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	if !controllerutil.RemoveFinalizer(obj, finalizer) {
		return nil
	}
	if err := c.Patch(ctx, obj, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing finalizer: %w", err))
	}
	return nil
}

// objectID names the object key of kind in what the manager keeps per
// object: its claim on a kept clone, its CRD bundles.
func objectID(kind string, key types.NamespacedName) string {
	return kind + "/" + key.String()
}
