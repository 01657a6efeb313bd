package registry

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// IsCloudProvider tells the cloud providers (aws, azure, gcp), whose
// registry credentials come from workload identity, from the generic one
// (or empty), and refuses any other name with an error wrapping
// ErrInvalidConfig. It is the one place that knows the names.
func IsCloudProvider(provider string) (bool, error) {
	switch provider {
	case "", "generic":
		return false, nil
	case "aws", "azure", "gcp":
		return true, nil
	default:
		return false, fmt.Errorf("%w: unknown provider %q (want generic, aws, azure or gcp)", ErrInvalidConfig, provider)
	}
}

// CheckCloudSettings refuses, for a cloud provider, the settings that would
// let its token reach a server other than the provider's registry: plain
// HTTP (spec.insecure), a CA of the object's own (spec.certSecretRef) and a
// proxy (spec.proxySecretRef), as Flux does. The error wraps
// ErrUnsafeCloudSettings and ErrInvalidConfig and names the settings.
func CheckCloudSettings(provider string, insecure, certSecret, proxySecret bool) error {
	cloud, err := IsCloudProvider(provider)
	if err != nil || !cloud {
		return err
	}
	var set []string
	for name, on := range map[string]bool{"insecure": insecure, "certSecretRef": certSecret, "proxySecretRef": proxySecret} {
		if on {
			set = append(set, name)
		}
	}
	if len(set) == 0 {
		return nil
	}
	slices.Sort(set)
	return fmt.Errorf("%w: %w: provider %s cannot be used with %s", ErrInvalidConfig, ErrUnsafeCloudSettings, provider, strings.Join(set, ", "))
}

// RegistryHost returns the registry host of image (a repository name as in
// spec.image), as go-containerregistry names it: index.docker.io for
// Docker Hub.
func RegistryHost(image string) (string, error) {
	repo, err := parseRepository(image, false)
	if err != nil {
		return "", err
	}
	return repo.RegistryStr(), nil
}

// CanonicalName returns the full name of image as Flux reports it in
// status.canonicalImageName: nginx is index.docker.io/library/nginx.
func CanonicalName(image string) (string, error) {
	repo, err := parseRepository(image, false)
	if err != nil {
		return "", err
	}
	return repo.Name(), nil
}

// parseRepository parses spec.image as Flux does: a repository name
// without scheme, tag or digest.
func parseRepository(image string, insecure bool) (name.Repository, error) {
	if scheme, _, ok := strings.Cut(image, "://"); ok {
		return name.Repository{}, fmt.Errorf("%w: image %q should not start with a URL scheme; remove '%s://'", ErrInvalidConfig, image, scheme)
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(image, opts...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("%w: parsing image %q: %w", ErrInvalidConfig, image, err)
	}
	path := strings.TrimPrefix(image, ref.Context().RegistryStr())
	if _, suffix, ok := strings.Cut(path, ":"); ok {
		return name.Repository{}, fmt.Errorf("%w: image %q should not contain a tag; remove ':%s'", ErrInvalidConfig, image, suffix)
	}
	if strings.Contains(path, "@") {
		return name.Repository{}, fmt.Errorf("%w: image %q should not contain a digest", ErrInvalidConfig, image)
	}
	return ref.Context(), nil
}
