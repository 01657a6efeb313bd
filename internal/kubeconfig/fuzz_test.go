package kubeconfig

import (
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/client"
)

// FuzzRESTConfig feeds arbitrary kubeconfigs to the check with every flag
// off: whatever it accepts must run no plugin, name no file and verify TLS.
func FuzzRESTConfig(f *testing.F) {
	for _, user := range []string{"", "    exec: {command: /bin/sh}", "    tokenFile: /etc/passwd", "    client-key: /k", "    auth-provider: {name: gcp}"} {
		f.Add(kubeconfigWith("", user))
	}
	f.Add(kubeconfigWith("    insecure-skip-tls-verify: true", ""))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Config","current-context":"c","contexts":[{"name":"c","context":{"cluster":"c","user":"u"}}],"clusters":[{"name":"c","cluster":{"server":"https://h"}}],"users":[{"name":"u","user":{"exec":{"command":"x"}}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := RESTConfig(data, client.KubeConfigOptions{})
		if err != nil {
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error quotes the input: %v", err)
			}
			return
		}
		switch {
		case cfg.ExecProvider != nil:
			t.Fatalf("accepted an exec plugin")
		case cfg.AuthProvider != nil:
			t.Fatalf("accepted an auth-provider plugin")
		case cfg.BearerTokenFile != "", cfg.CertFile != "", cfg.KeyFile != "", cfg.CAFile != "":
			t.Fatalf("accepted a file reference: token %q cert %q key %q ca %q", cfg.BearerTokenFile, cfg.CertFile, cfg.KeyFile, cfg.CAFile)
		case cfg.Insecure:
			t.Fatalf("accepted insecure-skip-tls-verify")
		}
	})
}
