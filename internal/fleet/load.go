package fleet

import (
	"context"
	"fmt"

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
	return Inputs{
		Policies:     policies.Items,
		Repositories: repositories.Items,
		Automations:  automations.Items,
		Syncs:        syncs.Items,
		Gates:        gates.Items,
	}, nil
}
