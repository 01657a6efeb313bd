package controllers

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch

import (
	"cmp"
	"context"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// Cluster API's Clusters are read as unstructured objects, four fields of
// them, rather than through sigs.k8s.io/cluster-api's Go types: those tie
// uprev's Kubernetes libraries to Cluster API's release train, and know one
// API version, while the clusters uprev runs on serve v1beta1 (Cluster API
// up to 1.10) or v1beta2 (1.11 on). The version the API server prefers is
// read, whichever it is.

// clusterGroupKind is Cluster API's Cluster.
var clusterGroupKind = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}

// clusterKubeConfigSuffix makes, after a Cluster's name, the name of the
// Secret in which Cluster API writes its kubeconfig (key `value`).
const clusterKubeConfigSuffix = "-kubeconfig"

// pendingTarget is a target selected through its Cluster that cannot be
// applied to yet, and why.
type pendingTarget struct {
	target  uprevv1.Target
	message string
}

// clusterGVK returns the kind of Cluster API's Clusters in the version
// the API server prefers; installed is false when it serves none.
func clusterGVK(mapper apimeta.RESTMapper) (gvk schema.GroupVersionKind, installed bool, err error) {
	m, err := mapper.RESTMapping(clusterGroupKind)
	switch {
	case apimeta.IsNoMatchError(err):
		return schema.GroupVersionKind{}, false, nil
	case err != nil:
		return schema.GroupVersionKind{}, false, fmt.Errorf("finding the API version of %s: %w", clusterGroupKind, err)
	}
	return m.GroupVersionKind, true, nil
}

// selectClusters returns the targets of the Cluster API Clusters of ns
// with the labels selector asks for, by Cluster name, and their labels;
// those not ready to be applied to are pending. Clusters being deleted
// are left out: they leave the fleet.
func (r *SyncReconciler) selectClusters(ctx context.Context, ns string, selector *uprevv1.TargetSelector) ([]uprevv1.Target, []pendingTarget, map[string]map[string]string, error) {
	gvk, installed, err := clusterGVK(r.RESTMapper())
	if err != nil {
		return nil, nil, nil, err
	}
	if !installed {
		return nil, nil, nil, degraded(uprevv1.InvalidSpecReason, fmt.Errorf("a clusterSelector selects Cluster API Clusters, and Cluster API is not installed: the API server serves no %s", clusterGroupKind))
	}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(selector.MatchLabels)); err != nil {
		return nil, nil, nil, fmt.Errorf("listing the Clusters a clusterSelector selects: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, nil, nil, nil
	}
	secrets, err := r.secretNames(ctx, ns)
	if err != nil {
		return nil, nil, nil, err
	}
	var ready []uprevv1.Target
	var pending []pendingTarget
	labels := map[string]map[string]string{}
	for i := range list.Items {
		c := &list.Items[i]
		if c.GetDeletionTimestamp() != nil {
			continue
		}
		secret := c.GetName() + clusterKubeConfigSuffix
		t := uprevv1.Target{
			Name:       cmp.Or(c.GetLabels()[uprevv1.TargetNameLabel], c.GetName()),
			KubeConfig: &uprevv1.KubeConfigReference{SecretRef: meta.LocalObjectReference{Name: secret}},
		}
		labels[t.Name] = c.GetLabels()
		switch initialized, phase := controlPlaneInitialized(c); {
		case !initialized:
			pending = append(pending, pendingTarget{t, fmt.Sprintf("waiting for Cluster %s: its control plane is not initialized yet (phase %s)", c.GetName(), cmp.Or(phase, "unknown"))})
		case !secrets.Has(secret):
			pending = append(pending, pendingTarget{t, fmt.Sprintf("waiting for Cluster %s: its kubeconfig Secret %s does not exist yet", c.GetName(), secret)})
		default:
			ready = append(ready, t)
		}
	}
	return ready, pending, labels, nil
}

// secretNames returns the names of the Secrets of ns, read from the API
// server as metadata alone.
func (r *SyncReconciler) secretNames(ctx context.Context, ns string) (sets.Set[string], error) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "SecretList"})
	if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing the Secrets of %s: %w", ns, err)
	}
	names := sets.New[string]()
	for _, s := range list.Items {
		names.Insert(s.Name)
	}
	return names, nil
}

// controlPlaneInitialized says whether a Cluster's control plane is
// initialized, so that its API server answers, and gives its phase. It
// reads v1beta2's status.initialization.controlPlaneInitialized,
// v1beta1's status.controlPlaneReady, and the ControlPlaneInitialized
// condition both versions have.
func controlPlaneInitialized(c *unstructured.Unstructured) (bool, string) {
	phase, _, _ := unstructured.NestedString(c.Object, "status", "phase")
	for _, path := range [][]string{{"status", "initialization", "controlPlaneInitialized"}, {"status", "controlPlaneReady"}} {
		if ok, _, _ := unstructured.NestedBool(c.Object, path...); ok {
			return true, phase
		}
	}
	conditions, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, raw := range conditions {
		if cond, ok := raw.(map[string]any); ok && cond["type"] == "ControlPlaneInitialized" && cond["status"] == "True" {
			return true, phase
		}
	}
	return false, phase
}

// clusterWatch returns the object to watch so that a Cluster that is
// created, deleted, relabelled or gets its control plane starts a run of
// the Syncs that select it, when Cluster API is installed; without it
// (ok false), Clusters are read at each interval only, and the manager
// starts as on any cluster.
func clusterWatch(mapper apimeta.RESTMapper) (obj client.Object, ok bool, err error) {
	gvk, installed, err := clusterGVK(mapper)
	if err != nil || !installed {
		return nil, false, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, true, nil
}

// syncsSelectingCluster returns the Syncs of a Cluster's namespace whose
// clusterSelector selects it.
func (r *SyncReconciler) syncsSelectingCluster(ctx context.Context, c client.Object) []reconcile.Request {
	var syncs uprevv1.SyncList
	if err := r.List(ctx, &syncs, client.InNamespace(c.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Syncs that may select a Cluster", "cluster", klog.KObj(c))
		return nil
	}
	var out []reconcile.Request
	for _, s := range syncs.Items {
		for _, t := range s.Spec.Targets {
			if t.ClusterSelector != nil && labels.SelectorFromSet(t.ClusterSelector.MatchLabels).Matches(labels.Set(c.GetLabels())) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
				break
			}
		}
	}
	return out
}

// clusterChanged passes the Cluster events that can change a fleet: a
// Cluster created or deleted, its labels changed, its deletion started, or
// its control plane initialized; not the status updates Cluster API makes
// all the time.
var clusterChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldC, okOld := e.ObjectOld.(*unstructured.Unstructured)
		newC, okNew := e.ObjectNew.(*unstructured.Unstructured)
		if !okOld || !okNew {
			return true
		}
		oldInit, _ := controlPlaneInitialized(oldC)
		newInit, _ := controlPlaneInitialized(newC)
		return !labels.Equals(oldC.GetLabels(), newC.GetLabels()) ||
			(oldC.GetDeletionTimestamp() == nil) != (newC.GetDeletionTimestamp() == nil) ||
			oldInit != newInit
	},
}
