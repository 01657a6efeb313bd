package fleet

import (
	"context"
	"fmt"
	"maps"
	"slices"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// Load lists the objects Build needs in namespace, or in every namespace
// when namespace is empty. The reader's scheme must know uprev's and Flux's
// image kinds.
func Load(ctx context.Context, c client.Reader, namespace string) (Inputs, error) {
	var (
		policies     imagev1.ImagePolicyList
		repositories imagev1.ImageRepositoryList
		automations  uprevv1.UpdateAutomationList
		syncs        uprevv1.SyncList
		gates        uprevv1.ReleaseGateList
	)
	for _, list := range []struct {
		kind string
		list client.ObjectList
	}{
		{"ImagePolicies", &policies},
		{"ImageRepositories", &repositories},
		{"UpdateAutomations", &automations},
		{"Syncs", &syncs},
		{"ReleaseGates", &gates},
	} {
		if err := c.List(ctx, list.list, client.InNamespace(namespace)); err != nil {
			return Inputs{}, fmt.Errorf("listing %s: %w", list.kind, err)
		}
	}
	if err := AttachTargets(ctx, c, syncs.Items); err != nil {
		return Inputs{}, err
	}
	return Inputs{
		Policies:     policies.Items,
		Repositories: repositories.Items,
		Automations:  automations.Items,
		Syncs:        syncs.Items,
		Gates:        gates.Items,
	}, nil
}

// AttachTargets reads the SyncTargets of syncs and puts each one's status
// into its Sync's status.targets, in memory only, so that a target's
// status is read by name (SyncStatus.Target) whatever the layout: from a
// SyncTarget, or from status.targets of a Sync that its manager has not
// reconciled since SyncTargets came. A SyncTarget replaces the entry of
// the same target. Only a Sync's own records count (SyncTarget.IsRecordOf):
// their status is written by uprev alone, through the status subresource.
func AttachTargets(ctx context.Context, c client.Reader, syncs []uprevv1.Sync) error {
	bySync := map[[2]string]*uprevv1.Sync{}
	namespaces := map[string]bool{}
	for i := range syncs {
		s := &syncs[i]
		bySync[[2]string{s.Namespace, s.Name}] = s
		namespaces[s.Namespace] = true
	}
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		var list uprevv1.SyncTargetList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("listing the SyncTargets of namespace %s: %w", ns, err)
		}
		for _, st := range list.Items {
			s, ok := bySync[[2]string{st.Namespace, st.Spec.Sync}]
			if !ok || !st.IsRecordOf(s) {
				continue
			}
			ts := st.Status
			ts.Name = st.Spec.Target
			if old := s.Status.Target(ts.Name); old != nil {
				*old = ts
			} else {
				s.Status.Targets = append(s.Status.Targets, ts)
			}
		}
	}
	return nil
}
