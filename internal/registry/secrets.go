package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/google/go-containerregistry/pkg/authn"
	k8schain "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	corev1 "k8s.io/api/core/v1"
)

// keychain returns a keychain resolving credentials from the data of
// dockerconfigjson (or legacy dockercfg) pull secrets the way the kubelet
// does, or nil when there are none. Errors never quote secret content.
func keychain(ctx context.Context, pullSecrets []map[string][]byte) (authn.Keychain, error) {
	if len(pullSecrets) == 0 {
		return nil, nil
	}
	secrets := make([]corev1.Secret, 0, len(pullSecrets))
	for i, data := range pullSecrets {
		secret := corev1.Secret{Data: data}
		var key string
		switch {
		case len(data[corev1.DockerConfigJsonKey]) > 0:
			secret.Type, key = corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey
		case len(data[corev1.DockerConfigKey]) > 0:
			secret.Type, key = corev1.SecretTypeDockercfg, corev1.DockerConfigKey
		default:
			return nil, fmt.Errorf("%w: pull secret %d has no %s key", ErrInvalidConfig, i+1, corev1.DockerConfigJsonKey)
		}
		if !json.Valid(data[key]) {
			return nil, fmt.Errorf("%w: %s of pull secret %d is not valid JSON", ErrInvalidConfig, key, i+1)
		}
		secrets = append(secrets, secret)
	}
	chain, err := k8schain.NewFromPullSecrets(ctx, secrets)
	if err != nil {
		return nil, fmt.Errorf("%w: reading pull secrets: %w", ErrInvalidConfig, err)
	}
	return chain, nil
}

// TLSConfig returns the TLS settings of a certSecretRef's data: ca.crt is
// trusted in addition to the system roots, and tls.crt with tls.key is
// presented as the client certificate. It returns nil for no data.
func TLSConfig(data map[string][]byte) (*tls.Config, error) {
	if len(data) == 0 {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := data["ca.crt"]; len(ca) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("%w: ca.crt of the certificate secret holds no PEM certificate", ErrInvalidConfig)
		}
		cfg.RootCAs = pool
	}
	cert, key := data["tls.crt"], data["tls.key"]
	switch {
	case len(cert) > 0 && len(key) > 0:
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%w: loading tls.crt and tls.key of the certificate secret: %w", ErrInvalidConfig, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case len(cert) > 0 || len(key) > 0:
		return nil, fmt.Errorf("%w: the certificate secret must hold both tls.crt and tls.key, or neither", ErrInvalidConfig)
	}
	return cfg, nil
}

// ProxyURL returns the proxy of a proxySecretRef's data: address, with
// username and password as its credentials. Errors never quote the address,
// which may hold credentials.
func ProxyURL(data map[string][]byte) (*url.URL, error) {
	address := string(data["address"])
	if address == "" {
		return nil, fmt.Errorf("%w: the proxy secret has no address", ErrInvalidConfig)
	}
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: the address of the proxy secret is not a URL like http://proxy.example.com:3128", ErrInvalidConfig)
	}
	if username := string(data["username"]); username != "" {
		u.User = url.UserPassword(username, string(data["password"]))
	}
	return u, nil
}
