package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestRunFindsItsCluster shows where `uprev run` takes its cluster from:
// --kubeconfig when given (it had no such flag), and otherwise an error
// that says what to give, not client-go's advice to set KUBERNETES_MASTER.
func TestRunFindsItsCluster(t *testing.T) {
	g := NewWithT(t)
	path := strings.TrimPrefix(kubeconfigFlag, "--kubeconfig=")
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())

	o := managerOptions{kubeconfig: path}
	cfg, err := o.restConfig(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Host).To(HavePrefix("https://127.0.0.1:"), "the cluster of the file --kubeconfig names")

	o = managerOptions{}
	_, err = o.restConfig(t.Context())
	g.Expect(err).To(MatchError(errNoCluster))

	var stdout, stderr bytes.Buffer
	code := Execute(t.Context(), []string{"run", "--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--metrics-addr=0", "--health-addr=0"},
		Options{IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr}})
	g.Expect(code).To(Equal(1))
	g.Expect(stderr.String()).To(ContainSubstring("reading kubeconfig"))
	g.Expect(stderr.String()).To(ContainSubstring("missing"))
	g.Expect(stderr.String()).NotTo(ContainSubstring("KUBERNETES_MASTER"))
}
