package controllers

import (
	"context"

	fluxcache "github.com/fluxcd/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/source"
	"github.com/uprev-dev/uprev/internal/sourcekind"
)

// sourceAccess reads the Secrets a ReleaseSource of kind references, with
// c, exchanging a GitHub App for a token kept in tokens: what its scans
// and the notes of its updates are read with. A missing Secret is retried
// with backoff, as it may be created after the source.
func sourceAccess(ctx context.Context, c client.Reader, tokens *fluxcache.TokenCache, rs *uprevv1.ReleaseSource, kind sourcekind.Kind) (source.Access, error) {
	access := source.Access{}
	if t := rs.Spec.Timeout; t != nil {
		access.Timeout = t.Duration
	}
	var err error
	if ref := rs.Spec.SecretRef; ref != nil {
		if access.Secret, err = secretData(ctx, c, rs.Namespace, ref.Name); err != nil {
			return access, err
		}
		if gitrepo.IsGitHubApp(access.Secret) {
			if access.Secret, err = githubAppToken(ctx, tokens, rs, kind, access); err != nil {
				return access, err
			}
		}
	}
	if ref := rs.Spec.CertSecretRef; ref != nil {
		if access.CertSecret, err = secretData(ctx, c, rs.Namespace, ref.Name); err != nil {
			return access, err
		}
	}
	return access, nil
}

// githubAppToken exchanges the GitHub App of a ReleaseSource's Secret
// (Flux's keys: githubAppID, githubAppInstallationID, githubAppPrivateKey,
// githubAppBaseURL) for an installation token, as its kind takes it
// (Kind.GitHubApp): a bearer token for the releases API of githubReleases,
// the password of x-access-token for the https:// repository of gitTags.
// Other kinds take no GitHub App.
func githubAppToken(ctx context.Context, tokens *fluxcache.TokenCache, rs *uprevv1.ReleaseSource, kind sourcekind.Kind, access source.Access) (map[string][]byte, error) {
	url, bearer, ok := kind.GitHubApp()
	if !ok {
		return nil, stalledf(uprevv1.InvalidSpecReason, "spec.secretRef: a GitHub App authenticates githubReleases and gitTags only")
	}
	app := gitrepo.GitHubApp{Tokens: tokens, Kind: uprevv1.ReleaseSourceKind, Name: rs.Name, Namespace: rs.Namespace, Timeout: access.Timeout}
	creds, err := app.Credentials(ctx, url, access.Secret)
	if err != nil {
		return nil, gitError(err)
	}
	if bearer {
		return map[string][]byte{gitrepo.SecretBearerToken: creds[gitrepo.SecretPassword]}, nil
	}
	return creds, nil
}
