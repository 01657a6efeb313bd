package plan

import (
	"context"
	"fmt"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/update"
)

// ListPolicies reads the ImagePolicies in namespace (all namespaces when
// empty) and returns those an automation would write: ready, with a latest
// ref (see guard.PoliciesOf). The names of the others are returned as
// notReady, sorted by namespace/name.
func ListPolicies(ctx context.Context, c client.Reader, namespace string) (policies map[update.PolicyKey]guard.Policy, notReady []string, err error) {
	var list imagev1.ImagePolicyList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, nil, fmt.Errorf("listing image policies: %w", err)
	}
	policies, notReady = guard.PoliciesOf(list.Items)
	return policies, notReady, nil
}

// ListSources reads the ReleaseSources in namespace (all namespaces when
// empty) and returns those an automation would write, as the controller
// reads them (guard.SourcesOf): ready, with a selected version, keyed with
// update.SourceKind, and the URLs and hashes of their pinned assets for
// Input.Assets. The names of the others are returned as notReady, sorted by
// namespace/name.
func ListSources(ctx context.Context, c client.Reader, namespace string) (policies map[update.PolicyKey]guard.Policy, assets map[update.AssetKey]string, notReady []string, err error) {
	var list uprevv1.ReleaseSourceList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, nil, nil, fmt.Errorf("listing release sources: %w", err)
	}
	policies, assets, notReady = guard.SourcesOf(list.Items)
	return policies, assets, notReady, nil
}
