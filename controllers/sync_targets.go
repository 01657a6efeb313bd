package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// resolveTargets returns the targets of a Sync: its named ones, then,
// by name, one for every kubeconfig Secret of its namespace that a
// selector selects, named by the Secret's TargetNameLabel or its own name.
// It returns the labels of each selected target's Secret too, for
// the rollout's step selectors. Secrets are listed from the API server,
// as every Secret is read. Two
// targets of one name, one of them selected, are an error that a change of
// labels fixes: the Sync is not Ready and tries again at its interval.
func (r *SyncReconciler) resolveTargets(ctx context.Context, s *uprevv1.Sync) ([]uprevv1.Target, map[string]map[string]string, error) {
	var named, selected []uprevv1.Target
	labels := map[string]map[string]string{}
	bySecret := map[string]bool{}
	for i, t := range s.Spec.Targets {
		if t.Selector == nil {
			named = append(named, t)
			continue
		}
		var secrets corev1.SecretList
		if err := r.List(ctx, &secrets, client.InNamespace(s.Namespace), client.MatchingLabels(t.Selector.MatchLabels)); err != nil {
			return nil, nil, fmt.Errorf("listing the Secrets spec.targets[%d] selects: %w", i, err)
		}
		for _, secret := range secrets.Items {
			if bySecret[secret.Name] {
				continue
			}
			bySecret[secret.Name] = true
			name := cmp.Or(secret.Labels[uprevv1.TargetNameLabel], secret.Name)
			labels[name] = secret.Labels
			selected = append(selected, uprevv1.Target{
				Name:       name,
				KubeConfig: &uprevv1.KubeConfigReference{SecretRef: meta.LocalObjectReference{Name: secret.Name}},
			})
		}
	}
	slices.SortFunc(selected, func(a, b uprevv1.Target) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.KubeConfig.SecretRef.Name, b.KubeConfig.SecretRef.Name))
	})
	secretOf := map[string]string{}
	for _, t := range named {
		secretOf[t.Name] = "(named in spec.targets)"
	}
	for _, t := range selected {
		if other, dup := secretOf[t.Name]; dup {
			return nil, nil, degraded(uprevv1.InvalidSpecReason, fmt.Errorf("target %q: Secret %s is selected under a name that %s already has", t.Name, t.KubeConfig.SecretRef.Name, other))
		}
		secretOf[t.Name] = "Secret " + t.KubeConfig.SecretRef.Name
	}
	return append(named, selected...), labels, nil
}
