package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/auth"
	authutils "github.com/fluxcd/pkg/auth/utils"
	"github.com/fluxcd/pkg/cache"
	"github.com/google/go-containerregistry/pkg/authn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cloudIdentity is whose cloud identity obtains registry tokens.
type cloudIdentity struct {
	// Tokens keeps cloud registry tokens until shortly before they expire;
	// nil fetches one every time.
	Tokens *cache.TokenCache
	// DefaultServiceAccount (--default-service-account), when set, is the
	// service account of the object's namespace whose identity a
	// repository without spec.serviceAccountName uses (object-level
	// workload identity), as in Flux; the manager's own cloud identity is
	// then never used for a repository.
	DefaultServiceAccount string
}

// cloudCredentials obtains short-lived credentials for the registry of a
// repository whose spec.provider is aws, azure or gcp, through
// fluxcd/pkg/auth: with the service account spec.serviceAccountName, or
// else id.DefaultServiceAccount, of the repository's namespace (this needs
// the ObjectLevelWorkloadIdentity feature gate), or, when neither is set,
// with the controller's own workload identity. Tokens are kept in
// id.Tokens (when not nil) until shortly before they expire, so each scan
// starts with a valid one. Errors never quote a token.
func cloudCredentials(ctx context.Context, c client.Client, repo *imagev1.ImageRepository, id cloudIdentity) (authn.Authenticator, error) {
	name := repo.GetProvider()
	provider, err := authutils.ProviderByName[auth.ArtifactRegistryCredentialsProvider](name)
	if err != nil {
		return nil, stalled(imagev1.ImageURLInvalidReason, err)
	}
	if _, err := provider.ParseArtifactRepository(repo.Spec.Image); err != nil {
		return nil, stalled(imagev1.ImageURLInvalidReason, fmt.Errorf("spec.image for provider %s: %w", name, err))
	}
	opts := []auth.Option{auth.WithClient(c), auth.WithServiceAccountNamespace(repo.Namespace)}
	sa := cmp.Or(repo.Spec.ServiceAccountName, id.DefaultServiceAccount)
	if sa != "" {
		opts = append(opts, auth.WithServiceAccountName(sa))
	}
	if id.Tokens != nil {
		opts = append(opts, auth.WithCache(*id.Tokens, cache.InvolvedObject{
			Kind:      imagev1.ImageRepositoryKind,
			Name:      repo.Name,
			Namespace: repo.Namespace,
			Operation: cache.OperationReconcile,
		}))
	}
	creds, err := auth.GetArtifactRegistryCredentials(ctx, provider, repo.Spec.Image, opts...)
	if err != nil {
		if errors.Is(err, auth.ErrObjectLevelWorkloadIdentityNotEnabled) {
			field := "spec.serviceAccountName"
			if repo.Spec.ServiceAccountName == "" {
				field = "--default-service-account"
			}
			return nil, stalled(meta.FeatureGateDisabledReason,
				fmt.Errorf("%s with provider %s needs the controller flag --feature-gates=%s=true: %w",
					field, name, auth.FeatureGateObjectLevelWorkloadIdentity, err))
		}
		if repo.Spec.ServiceAccountName == "" && sa != "" && apierrors.IsNotFound(err) {
			return nil, transient(imagev1.AuthenticationFailedReason, fmt.Errorf(
				"provider %s without spec.serviceAccountName uses the service account %s/%s (--default-service-account), which does not exist: %w",
				name, repo.Namespace, sa, err))
		}
		return nil, transient(imagev1.AuthenticationFailedReason, fmt.Errorf("getting %s registry credentials: %w", name, err))
	}
	return creds.Authenticator, nil
}
