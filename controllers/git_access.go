package controllers

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/outbound"
)

// gitAccess says who reads a repository: the object (of kind), which its
// tokens are cached for, and the namespace of the Git Secret.
type gitAccess struct {
	kind            string
	object          client.Object
	secretNamespace string
}

// gitRemote returns the repository of src with the credentials of its
// Secret, built by gitrepo.Access (the one home of Git access from a
// Secret); a GitHub App in the Secret is exchanged for an installation
// token, kept in tokens while it is fresh. Its errors are sorted by
// gitError.
func gitRemote(ctx context.Context, c client.Reader, tokens *cache.TokenCache, access gitAccess, src uprevv1.GitSource) (*gitrepo.Remote, error) {
	var data map[string][]byte
	if src.SecretRef != nil {
		var err error
		if data, err = secretData(ctx, c, access.secretNamespace, src.SecretRef.Name); err != nil {
			return nil, err
		}
	}
	obj := access.object
	remote, err := gitrepo.Access{
		URL:     src.URL,
		Field:   "spec.git.url",
		Secret:  data,
		Timeout: src.GetTimeout(),
		App:     gitrepo.GitHubApp{Tokens: tokens, Kind: access.kind, Name: obj.GetName(), Namespace: obj.GetNamespace()},
	}.Remote(ctx)
	if err != nil {
		return nil, gitError(err)
	}
	return remote, nil
}

// commitSigner returns the signer of the automation's commits, nil when
// commits are not signed. keyType, Flux's signingKey.type, picks the key
// of the Secret when set: "gpg" its git.asc and passphrase, "ssh" its
// identity and password (the key's passphrase, as in a Git Secret);
// empty lets the Secret's keys tell.
func commitSigner(ctx context.Context, c client.Reader, auto *uprevv1.UpdateAutomation, keyType string) (*gitrepo.Signer, error) {
	key := auto.Spec.Git.Commit.SigningKey
	if key == nil {
		return nil, nil
	}
	data, err := secretData(ctx, c, auto.Namespace, key.SecretRef.Name)
	if err != nil {
		return nil, err
	}
	switch keyType {
	case "gpg":
		data = map[string][]byte{gitrepo.SecretOpenPGPKey: data[gitrepo.SecretOpenPGPKey], gitrepo.SecretPassphrase: data[gitrepo.SecretPassphrase]}
	case "ssh":
		data = map[string][]byte{gitrepo.SecretSSHSigningKey: data[gitrepo.SecretSSHSigningKey], gitrepo.SecretPassphrase: data[gitrepo.SecretPassword]}
	}
	signer, err := gitrepo.NewSigner(data)
	if err != nil {
		return nil, transient(uprevv1.InvalidSpecReason, fmt.Errorf("signing key %s: %w", key.SecretRef.Name, err))
	}
	return signer, nil
}

// gitError gives a Git failure its condition reason, for every kind that
// reads Git (Syncs, UpdateAutomations, gitTags ReleaseSources): a URL Git
// cannot read or a denied address is Stalled (InvalidSpec), as only a
// change to the object mends it; every other Git failure is retried with
// backoff, as credentials, host keys and branches are fixed outside the
// object, but a bad commit, which only someone's next push mends, leaves
// the object not Ready (BadCommit) until its next interval.
func gitError(err error) error {
	var bad *gitrepo.BadCommitError
	switch {
	case errors.Is(err, gitrepo.ErrInvalidURL), errors.Is(err, outbound.ErrDenied):
		return stalled(uprevv1.InvalidSpecReason, err)
	case errors.As(err, &bad):
		return degraded(uprevv1.BadCommitReason, err)
	case errors.Is(err, gitrepo.ErrAuthentication), errors.Is(err, gitrepo.ErrUnknownHostKey), errors.Is(err, gitrepo.ErrInvalidSecret):
		return transient(uprevv1.AuthenticationFailedReason, err)
	case errors.Is(err, gitrepo.ErrTimeout):
		return transient(uprevv1.GitTimeoutReason, err)
	default:
		return transient(uprevv1.GitOperationFailedReason, err)
	}
}
