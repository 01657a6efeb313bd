package kubeconfig

import (
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/client"
	. "github.com/onsi/gomega"
)

// base is a kubeconfig with inline credentials; cases append to its user
// and cluster.
const base = `apiVersion: v1
kind: Config
current-context: target
contexts:
- name: target
  context: {cluster: target, user: admin}
clusters:
- name: target
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Q0E=
%s
users:
- name: admin
  user:
%s
`

// kubeconfigWith returns base with lines added to its cluster and given
// as its user; an empty user has an inline token.
func kubeconfigWith(cluster, user string) []byte {
	if user == "" {
		user = "    token: s3cret-token"
	}
	return []byte(strings.Replace(strings.Replace(base, "%s\n", cluster+"\n", 1), "%s\n", user+"\n", 1))
}

func TestRESTConfig(t *testing.T) {
	insecure := client.KubeConfigOptions{InsecureExecProvider: true, InsecureTLS: true}
	for _, tc := range []struct {
		name          string
		cluster, user string
		opts          client.KubeConfigOptions
		refused       string
	}{
		{name: "inline data is accepted"},
		{name: "exec plugin", user: "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/touch, args: [/tmp/owned]}", refused: `users["admin"].exec`},
		{name: "exec plugin allowed by flag", user: "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true, interactiveMode: Never}", opts: insecure},
		{name: "auth-provider plugin", user: "    auth-provider: {name: oidc, config: {idp-issuer-url: https://issuer}}", refused: `users["admin"].auth-provider`},
		{name: "token file", user: "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token", refused: "tokenFile"},
		{name: "token file even with every flag", user: "    tokenFile: /etc/passwd", opts: insecure, refused: "tokenFile"},
		{name: "client certificate file", user: "    client-certificate: /tls/tls.crt", refused: "client-certificate"},
		{name: "client key file", user: "    client-key: /tls/tls.key", refused: "client-key"},
		{name: "certificate authority file", cluster: "    certificate-authority: /tls/ca.crt", refused: "certificate-authority"},
		{name: "TLS verification off", cluster: "    insecure-skip-tls-verify: true", refused: `clusters["target"].insecure-skip-tls-verify`},
		{name: "TLS verification off allowed by flag", cluster: "    insecure-skip-tls-verify: true", opts: client.KubeConfigOptions{InsecureTLS: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			data := kubeconfigWith(tc.cluster, tc.user)
			if tc.cluster != "" && strings.Contains(tc.cluster, "insecure") {
				// A cluster that skips verification may not also name a CA.
				data = []byte(strings.Replace(string(data), "    certificate-authority-data: Q0E=\n", "", 1))
			}
			cfg, err := RESTConfig(data, tc.opts)
			if tc.refused == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cfg.Host).To(Equal("https://127.0.0.1:6443"))
				return
			}
			var refused *RefusedError
			g.Expect(err).To(BeAssignableToTypeOf(refused))
			g.Expect(err.Error()).To(ContainSubstring(tc.refused))
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cret-token"))
		})
	}
}

func TestRESTConfigInvalid(t *testing.T) {
	for name, data := range map[string]string{
		"not YAML":        "s3cret-token: [",
		"no context":      "apiVersion: v1\nkind: Config\nusers: [{name: a, user: {token: s3cret-token}}]\n",
		"missing cluster": "apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: nope, user: a}}]\nusers: [{name: a, user: {token: s3cret-token}}]\n",
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := RESTConfig([]byte(data), client.KubeConfigOptions{})
			var invalid *InvalidError
			g.Expect(err).To(BeAssignableToTypeOf(invalid))
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cret-token"))
		})
	}
}

// TestConnectionKey: kubeconfigs that reach one API server as one user
// share a key whatever their entries are named; any difference of server,
// CA, proxy or credential gives another.
func TestConnectionKey(t *testing.T) {
	g := NewWithT(t)
	key := func(data []byte) string {
		t.Helper()
		k, err := ConnectionKey(data)
		g.Expect(err).NotTo(HaveOccurred())
		return k
	}
	same := key(kubeconfigWith("", ""))
	renamed := strings.NewReplacer("name: target", "name: prod-eu", "cluster: target", "cluster: prod-eu", "current-context: target", "current-context: prod-eu",
		"name: admin", "name: fleet", "user: admin", "user: fleet").Replace(string(kubeconfigWith("", "")))
	g.Expect(key([]byte(renamed))).To(Equal(same), "names do not matter")
	for name, data := range map[string][]byte{
		"another token":  kubeconfigWith("", "    token: other-token"),
		"a client cert":  kubeconfigWith("", "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ"),
		"impersonating":  kubeconfigWith("", "    token: s3cret-token\n    as: system:admin"),
		"another CA":     []byte(strings.Replace(string(kubeconfigWith("", "")), "Q0E=", "T1RIRVI=", 1)),
		"another server": []byte(strings.Replace(string(kubeconfigWith("", "")), "127.0.0.1:6443", "127.0.0.1:7443", 1)),
		"a proxy":        kubeconfigWith("    proxy-url: http://proxy.example.com:3128", ""),
		"a server name":  kubeconfigWith("    tls-server-name: other.example.com", ""),
	} {
		g.Expect(key(data)).NotTo(Equal(same), name)
	}
	_, err := ConnectionKey([]byte("current-context: nowhere\n"))
	g.Expect(err).To(MatchError(ContainSubstring("no context")))
}
