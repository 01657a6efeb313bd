package controllers

import (
	"context"
	"fmt"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/registry"
)

// unsafeCloudSettingsReason: a cloud provider is combined with insecure,
// certSecretRef or proxySecretRef, which could send its token elsewhere.
const unsafeCloudSettingsReason = "UnsafeCloudSettings"

// registryClient returns the client of an ImageRepository's registry, with
// its credentials, cloud identity, TLS and proxy (see registryAccess): the
// one way the scan, the digest reflection and the CRD bundles reach a
// registry for an object. Its errors carry their condition reasons.
func registryClient(ctx context.Context, c client.Client, scanner *registry.Scanner, repo *imagev1.ImageRepository, id cloudIdentity) (*registry.Client, error) {
	access, err := registryAccess(ctx, c, repo, id)
	if err != nil {
		return nil, err
	}
	reg, err := scanner.Client(ctx, access)
	if err != nil {
		return nil, registryError(err)
	}
	return reg, nil
}

// registryAccess reads the Secrets an ImageRepository references into the
// access settings of its registry, and for a cloud provider obtains the
// registry credentials with id, for the registry host of spec.image only.
// A cloud provider with insecure, certSecretRef or proxySecretRef is
// refused (Stalled) before any token is asked for. A missing Secret or
// service account is retried with backoff, as it may be created after the
// repository.
func registryAccess(ctx context.Context, c client.Client, repo *imagev1.ImageRepository, id cloudIdentity) (registry.Access, error) {
	access := registry.Access{
		Insecure: repo.Spec.Insecure,
		Provider: repo.GetProvider(),
		Timeout:  repo.GetTimeout(),
	}
	ns := repo.Namespace
	cloud, err := registry.IsCloudProvider(access.Provider)
	if err != nil {
		return access, registryError(err)
	}
	if err := registry.CheckCloudSettings(access.Provider, repo.Spec.Insecure, repo.Spec.CertSecretRef != nil, repo.Spec.ProxySecretRef != nil); err != nil {
		return access, stalled(unsafeCloudSettingsReason, err)
	}
	if ref := repo.Spec.SecretRef; ref != nil {
		data, err := secretData(ctx, c, ns, ref.Name)
		if err != nil {
			return access, err
		}
		access.PullSecrets = append(access.PullSecrets, data)
	}
	// With a cloud provider, the service account is the workload identity,
	// not a holder of imagePullSecrets.
	if name := repo.Spec.ServiceAccountName; name != "" && !cloud {
		var sa corev1.ServiceAccount
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &sa); err != nil {
			if apierrors.IsNotFound(err) {
				return access, transient(imagev1.AuthenticationFailedReason, fmt.Errorf("service account %s/%s not found", ns, name))
			}
			return access, fmt.Errorf("reading service account %s/%s: %w", ns, name, err)
		}
		for _, ps := range sa.ImagePullSecrets {
			data, err := secretData(ctx, c, ns, ps.Name)
			if err != nil {
				return access, err
			}
			access.PullSecrets = append(access.PullSecrets, data)
		}
	}
	if ref := repo.Spec.CertSecretRef; ref != nil {
		if access.CertSecret, err = secretData(ctx, c, ns, ref.Name); err != nil {
			return access, err
		}
	}
	if ref := repo.Spec.ProxySecretRef; ref != nil {
		if access.ProxySecret, err = secretData(ctx, c, ns, ref.Name); err != nil {
			return access, err
		}
	}
	if cloud {
		if access.CloudRegistry, err = registry.RegistryHost(repo.Spec.Image); err != nil {
			return access, registryError(err)
		}
		if access.CloudCredentials, err = cloudCredentials(ctx, c, repo, id); err != nil {
			return access, err
		}
	}
	return access, nil
}

// secretData returns the data of a Secret; an error names the Secret, never
// its content.
func secretData(ctx context.Context, c client.Reader, namespace, name string) (map[string][]byte, error) {
	var s corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, transient(uprevv1.SecretNotFoundReason, fmt.Errorf("secret %s/%s not found", namespace, name))
		}
		return nil, fmt.Errorf("reading secret %s/%s: %w", namespace, name, err)
	}
	return s.Data, nil
}
