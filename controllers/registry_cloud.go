package controllers

import (
	"context"
	"errors"
	"fmt"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/auth"
	authutils "github.com/fluxcd/pkg/auth/utils"
	"github.com/fluxcd/pkg/cache"
	"github.com/google/go-containerregistry/pkg/authn"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/registry"
)

// isCloudProvider tells whether spec.provider names a cloud whose registry
// credentials come from workload identity.
func isCloudProvider(provider string) bool {
	switch provider {
	case "aws", "azure", "gcp":
		return true
	}
	return false
}

// cloudCredentials obtains short-lived credentials for the registry of a
// repository whose spec.provider is aws, azure or gcp, through
// fluxcd/pkg/auth: with the controller's own workload identity, or, when
// spec.serviceAccountName is set and the ObjectLevelWorkloadIdentity
// feature gate is on, with that service account's. Tokens are kept in
// tokens (when not nil) until shortly before they expire, so each scan
// starts with a valid one. Errors never quote a token.
func cloudCredentials(ctx context.Context, c client.Client, repo *imagev1.ImageRepository,
	proxySecret map[string][]byte, tokens *cache.TokenCache) (authn.Authenticator, error) {
	name := repo.GetProvider()
	provider, err := authutils.ProviderByName[auth.ArtifactRegistryCredentialsProvider](name)
	if err != nil {
		return nil, stalled(imagev1.ImageURLInvalidReason, err)
	}
	if _, err := provider.ParseArtifactRepository(repo.Spec.Image); err != nil {
		return nil, stalled(imagev1.ImageURLInvalidReason, fmt.Errorf("spec.image for provider %s: %w", name, err))
	}
	opts := []auth.Option{auth.WithClient(c), auth.WithServiceAccountNamespace(repo.Namespace)}
	if sa := repo.Spec.ServiceAccountName; sa != "" {
		opts = append(opts, auth.WithServiceAccountName(sa))
	}
	if tokens != nil {
		opts = append(opts, auth.WithCache(*tokens, cache.InvolvedObject{
			Kind:      imagev1.ImageRepositoryKind,
			Name:      repo.Name,
			Namespace: repo.Namespace,
			Operation: cache.OperationReconcile,
		}))
	}
	if len(proxySecret) > 0 {
		proxy, err := registry.ProxyURL(proxySecret)
		if err != nil {
			return nil, registryError(err)
		}
		opts = append(opts, auth.WithProxyURL(*proxy))
	}
	creds, err := auth.GetArtifactRegistryCredentials(ctx, provider, repo.Spec.Image, opts...)
	if err != nil {
		if errors.Is(err, auth.ErrObjectLevelWorkloadIdentityNotEnabled) {
			return nil, stalled(meta.FeatureGateDisabledReason,
				fmt.Errorf("spec.serviceAccountName with provider %s needs the controller flag --feature-gates=%s=true: %w",
					name, auth.FeatureGateObjectLevelWorkloadIdentity, err))
		}
		return nil, transient(imagev1.AuthenticationFailedReason, fmt.Errorf("getting %s registry credentials: %w", name, err))
	}
	return creds.Authenticator, nil
}
