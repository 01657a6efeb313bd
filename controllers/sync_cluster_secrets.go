package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// clusterNameLabel is the label Cluster API puts on the Secrets it writes
// for a Cluster, the kubeconfig Secret among them, naming the Cluster.
const clusterNameLabel = "cluster.x-k8s.io/cluster-name"

// kubeConfigSecretWatch returns the source that starts a run of the Syncs
// selecting a Cluster when its kubeconfig Secret is created or deleted, so
// that a Cluster whose control plane was initialized before its Secret
// was written joins the rollout at once, not at the Sync's interval. It
// watches through a cache of its own that holds the metadata of the
// Secrets Cluster API labels and no other: the manager keeps no Secrets
// of the cluster in memory (clientOptions), and reads a kubeconfig from
// the API server when a run needs it.
func (r *SyncReconciler) kubeConfigSecretWatch(mgr ctrl.Manager) (source.Source, error) {
	labelled, err := labels.NewRequirement(clusterNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		ByObject:         map[client.Object]cache.ByObject{secret: {Label: labels.NewSelector().Add(*labelled)}},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("making the cache of Cluster API's kubeconfig Secrets: %w", err)
	}
	if err := mgr.Add(secrets); err != nil {
		return nil, err
	}
	return source.Kind(secrets, secret, handler.TypedEnqueueRequestsFromMapFunc(r.syncsOfKubeConfigSecret), kubeConfigSecretChanged), nil
}

// syncsOfKubeConfigSecret returns the Syncs that select the Cluster whose
// kubeconfig Secret s is; none for another Secret of the Cluster.
func (r *SyncReconciler) syncsOfKubeConfigSecret(ctx context.Context, s *metav1.PartialObjectMetadata) []reconcile.Request {
	name := s.GetLabels()[clusterNameLabel]
	if name == "" || s.GetName() != name+clusterKubeConfigSuffix {
		return nil
	}
	gvk, installed, err := clusterGVK(r.RESTMapper())
	if err != nil || !installed {
		return nil
	}
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, client.ObjectKey{Namespace: s.GetNamespace(), Name: name}, c); err != nil {
		if !apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).Error(err, "Reading the Cluster of a kubeconfig Secret", "secret", klog.KObj(s))
		}
		return nil
	}
	return r.syncsSelectingCluster(ctx, c)
}

// kubeConfigSecretChanged passes a kubeconfig Secret's creation and
// deletion, which make its Cluster reachable or not; a change of its
// content is read by the next run, which reads the Secret anyway.
var kubeConfigSecretChanged = predicate.TypedFuncs[*metav1.PartialObjectMetadata]{
	UpdateFunc: func(event.TypedUpdateEvent[*metav1.PartialObjectMetadata]) bool { return false },
}
