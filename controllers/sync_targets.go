package controllers

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// resolvedTargets are the targets of a Sync, its selectors resolved.
type resolvedTargets struct {
	// targets are those the rollout applies to.
	targets []uprevv1.Target
	// labels are the labels of each selected target's Secret or Cluster,
	// for the rollout's step selectors.
	labels map[string]map[string]string
	// pending are the targets selected through Clusters not ready to be
	// applied to: they wait outside the rollout.
	pending []pendingTarget
}

// resolveTargets returns the targets of a Sync: its named ones, then,
// by name, one for every kubeconfig Secret of its namespace that a
// selector selects, named by the Secret's TargetNameLabel or its own name,
// and one for every Cluster API Cluster that a clusterSelector selects
// (selectClusters). Secrets are listed from the API server, as every
// Secret is read. Two targets of one name, one of them selected, are an
// error that a change of labels fixes: the Sync is not Ready and tries
// again at its interval.
func (r *SyncReconciler) resolveTargets(ctx context.Context, s *uprevv1.Sync) (*resolvedTargets, error) {
	var named, selected []uprevv1.Target
	res := &resolvedTargets{labels: map[string]map[string]string{}}
	bySecret := map[string]bool{}
	for i, t := range s.Spec.Targets {
		switch {
		case t.Selector != nil:
			var secrets corev1.SecretList
			if err := r.List(ctx, &secrets, client.InNamespace(s.Namespace), client.MatchingLabels(t.Selector.MatchLabels)); err != nil {
				return nil, fmt.Errorf("listing the Secrets spec.targets[%d] selects: %w", i, err)
			}
			for _, secret := range secrets.Items {
				if bySecret[secret.Name] {
					continue
				}
				bySecret[secret.Name] = true
				name := cmp.Or(secret.Labels[uprevv1.TargetNameLabel], secret.Name)
				res.labels[name] = secret.Labels
				selected = append(selected, uprevv1.Target{
					Name:       name,
					KubeConfig: &uprevv1.KubeConfigReference{SecretRef: meta.LocalObjectReference{Name: secret.Name}},
				})
			}
		case t.ClusterSelector != nil:
			ready, pending, labels, err := r.selectClusters(ctx, s.Namespace, t.ClusterSelector)
			if err != nil {
				return nil, err
			}
			for _, t := range ready {
				if !bySecret[t.KubeConfig.SecretRef.Name] {
					bySecret[t.KubeConfig.SecretRef.Name] = true
					selected = append(selected, t)
				}
			}
			for _, p := range pending {
				if !bySecret[p.target.KubeConfig.SecretRef.Name] {
					bySecret[p.target.KubeConfig.SecretRef.Name] = true
					res.pending = append(res.pending, p)
				}
			}
			maps.Copy(res.labels, labels)
		default:
			named = append(named, t)
		}
	}
	slices.SortFunc(selected, func(a, b uprevv1.Target) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.KubeConfig.SecretRef.Name, b.KubeConfig.SecretRef.Name))
	})
	slices.SortFunc(res.pending, func(a, b pendingTarget) int { return strings.Compare(a.target.Name, b.target.Name) })
	secretOf := map[string]string{}
	for _, t := range named {
		secretOf[t.Name] = "(named in spec.targets)"
	}
	pending := make([]uprevv1.Target, 0, len(res.pending))
	for _, p := range res.pending {
		pending = append(pending, p.target)
	}
	for _, t := range slices.Concat(selected, pending) {
		if other, dup := secretOf[t.Name]; dup {
			return nil, degraded(uprevv1.InvalidSpecReason, fmt.Errorf("target %q: Secret %s is selected under a name that %s already has", t.Name, t.KubeConfig.SecretRef.Name, other))
		}
		secretOf[t.Name] = "Secret " + t.KubeConfig.SecretRef.Name
	}
	res.targets = append(named, selected...)
	return res, nil
}
