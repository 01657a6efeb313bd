package plan

import (
	"context"
	"fmt"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/update"
)

// ListPolicies reads the ImagePolicies in namespace (all namespaces when
// empty) and returns those an automation would write: ready, with a latest
// ref. The names of the others are returned as notReady, sorted by
// namespace/name.
func ListPolicies(ctx context.Context, c client.Reader, namespace string) (policies map[update.PolicyKey]Policy, notReady []string, err error) {
	var list imagev1.ImagePolicyList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, nil, fmt.Errorf("listing image policies: %w", err)
	}
	policies, notReady = PoliciesOf(list.Items)
	return policies, notReady, nil
}

// PoliciesOf turns ImagePolicy objects into plan policies, skipping (and
// naming in notReady) those without a latest ref or not Ready, as the
// controller skips them.
func PoliciesOf(items []imagev1.ImagePolicy) (policies map[update.PolicyKey]Policy, notReady []string) {
	policies = make(map[update.PolicyKey]Policy, len(items))
	for i := range items {
		pol := &items[i]
		key := update.PolicyKey{Namespace: pol.Namespace, Name: pol.Name}
		ref := pol.Status.LatestRef
		if ref == nil || !conditions.IsReady(pol) {
			notReady = append(notReady, key.String())
			continue
		}
		policies[key] = Policy{
			Ref:      update.Ref{Image: ref.Name, Tag: ref.Tag, Digest: ref.Digest},
			Ordering: &Ordering{Policy: pol.Spec.Policy, FilterTags: pol.Spec.FilterTags},
		}
	}
	return policies, notReady
}
