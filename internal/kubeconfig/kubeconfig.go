// Package kubeconfig turns the kubeconfig of a Sync target, read from a
// Secret that any tenant may write, into a client configuration that cannot
// make the manager run a program or read one of its own files.
//
// File references are refused by Flux's own rule
// (fluxcd/pkg/runtime/client.ValidateKubeConfig). Exec and auth-provider
// plugins and disabled TLS verification are refused here, by name, unless
// the manager allows them with Flux's flags --insecure-kubeconfig-exec and
// --insecure-kubeconfig-tls (client.KubeConfigOptions). Flux's
// client.KubeConfig is not used to sanitise: it drops a plugin silently,
// which leaves the user guessing why the target refuses them, and it
// probes the target on every call.
package kubeconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/fluxcd/pkg/runtime/client"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// RefusedError is a kubeconfig that uses something the manager does not
// allow. Its message names the field, never a value.
type RefusedError struct {
	// Field is the offending field, such as `users["admin"].exec`, or
	// "file reference" when Why names the field.
	Field string
	// Why says why the field is refused and, where there is one, which
	// flag allows it.
	Why string
}

// Error implements error.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("kubeconfig refused: %s: %s", e.Field, e.Why)
}

// InvalidError is a kubeconfig that cannot be parsed or gives no usable
// configuration. It carries no credential of the input.
type InvalidError struct {
	// Why says what is wrong, without quoting the input.
	Why string
}

// Error implements error.
func (e *InvalidError) Error() string { return "invalid kubeconfig: " + e.Why }

// RESTConfig checks a serialized kubeconfig against opts and returns the
// client configuration of its current context. Nothing is executed and no
// file is read: a refused kubeconfig gives a *RefusedError, one that cannot
// be read an *InvalidError.
func RESTConfig(data []byte, opts client.KubeConfigOptions) (*rest.Config, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		// Parse errors may quote the input, which holds credentials.
		return nil, &InvalidError{Why: "it is not a kubeconfig in YAML or JSON"}
	}
	if err := Check(cfg, opts); err != nil {
		return nil, err
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		// Validation errors name contexts, clusters and users, never
		// their credentials.
		return nil, &InvalidError{Why: err.Error()}
	}
	return rc, nil
}

// ConnectionKey identifies how a serialized kubeconfig's current context
// reaches its API server: a SHA-256 of its cluster entry (server, CA,
// TLS server name, proxy and the rest) and of its user entry (every
// credential, impersonation and plugin field), extensions and names left
// out. Two kubeconfigs of one key reach the same API server as the same
// user in the same way, however their entries are named; any other
// difference, a credential's included, gives another key. It is for
// sharing one client between such kubeconfigs, never between two users.
func ConnectionKey(data []byte) (string, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return "", &InvalidError{Why: "it is not a kubeconfig in YAML or JSON"}
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return "", &InvalidError{Why: fmt.Sprintf("no context %q", cfg.CurrentContext)}
	}
	var entry struct {
		Cluster  clientcmdapi.Cluster  `json:"cluster"`
		AuthInfo clientcmdapi.AuthInfo `json:"user"`
	}
	if c := cfg.Clusters[ctx.Cluster]; c != nil {
		entry.Cluster = *c
	}
	if u := cfg.AuthInfos[ctx.AuthInfo]; u != nil {
		entry.AuthInfo = *u
	}
	entry.Cluster.Extensions, entry.AuthInfo.Extensions = nil, nil
	data, err = json.Marshal(entry)
	if err != nil {
		return "", fmt.Errorf("encoding the connection of context %q: %w", cfg.CurrentContext, err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// Check refuses a kubeconfig whose clusters or users, in any context, name
// a file, run a plugin, or skip TLS verification, except what opts allow.
// Entries are checked in name order, so the same input gives the same
// error.
func Check(cfg *clientcmdapi.Config, opts client.KubeConfigOptions) error {
	if err := client.ValidateKubeConfig(cfg); err != nil {
		return &RefusedError{Field: "file reference", Why: err.Error() + " (a Secret carries its data inline)"}
	}
	for _, name := range sortedKeys(cfg.Clusters) {
		if cfg.Clusters[name].InsecureSkipTLSVerify && !opts.InsecureTLS {
			return &RefusedError{
				Field: fmt.Sprintf("clusters[%q].insecure-skip-tls-verify", name),
				Why:   "TLS verification may only be turned off when the manager runs with --insecure-kubeconfig-tls",
			}
		}
	}
	for _, name := range sortedKeys(cfg.AuthInfos) {
		user := cfg.AuthInfos[name]
		if opts.InsecureExecProvider {
			continue
		}
		switch {
		case user.Exec != nil:
			return &RefusedError{
				Field: fmt.Sprintf("users[%q].exec", name),
				Why:   "credential plugins run in the manager and may only be used when it runs with --insecure-kubeconfig-exec",
			}
		case user.AuthProvider != nil:
			return &RefusedError{
				Field: fmt.Sprintf("users[%q].auth-provider", name),
				Why:   "auth-provider plugins run in the manager and may only be used when it runs with --insecure-kubeconfig-exec",
			}
		}
	}
	return nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
