// Package install tests the install manifests in config/ with the real
// kubectl (built by test/controlplane next to kube-apiserver) against a real
// API server, the way users install uprev.
package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// kubectl runs the kubectl binary against one cluster (or none, for
// `kubectl kustomize`), from the repository root.
type kubectl struct {
	t          *testing.T
	path       string
	root       string
	kubeconfig string
	home       string
}

// newKubectl finds kubectl in the control-plane assets directory, failing
// with how to build it when it is missing. kubeconfig may be empty.
func newKubectl(t *testing.T, kubeconfig string) *kubectl {
	t.Helper()
	path := filepath.Join(cluster.AssetsDir(), "kubectl")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("kubectl not found in %s: run `make controlplane` (or test/controlplane/build.sh) to build it, or set KUBEBUILDER_ASSETS", cluster.AssetsDir())
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return &kubectl{t: t, path: path, root: root, kubeconfig: kubeconfig, home: t.TempDir()}
}

// kubectlOn returns kubectl against c, with an administrator's
// kubeconfig of c written for it, and that kubeconfig's path.
func kubectlOn(t *testing.T, c *cluster.Cluster) (*kubectl, string) {
	t.Helper()
	kc, err := c.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return newKubectl(t, path), path
}

// kubectlError is a kubectl run that exited non-zero.
type kubectlError struct {
	args   []string
	err    error
	stdout string
	stderr string
}

func (e *kubectlError) Error() string {
	return fmt.Sprintf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(e.args, " "), e.err, e.stdout, e.stderr)
}

// try runs kubectl with args and returns its stdout and stderr; err is a
// *kubectlError when kubectl exits non-zero.
func (k *kubectl) try(args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(k.t.Context(), k.path, args...)
	cmd.Dir = k.root
	// A home of its own, so that the discovery cache and any kubeconfig or
	// .kuberc of the user running the tests play no part.
	cmd.Env = []string{"HOME=" + k.home, "KUBECONFIG=" + k.kubeconfig, "KUBECTL_KUBERC=false"}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if runErr := cmd.Run(); runErr != nil {
		return out.String(), errOut.String(), &kubectlError{args: args, err: runErr, stdout: out.String(), stderr: errOut.String()}
	}
	return out.String(), errOut.String(), nil
}

// run is try that fails the test when kubectl exits non-zero.
func (k *kubectl) run(args ...string) (stdout, stderr string) {
	k.t.Helper()
	stdout, stderr, err := k.try(args...)
	if err != nil {
		k.t.Fatal(err)
	}
	return stdout, stderr
}

// build returns the objects `kubectl kustomize dir` renders.
func (k *kubectl) build(dir string) []*unstructured.Unstructured {
	k.t.Helper()
	out, _ := k.run("kustomize", dir)
	objs, err := decodeObjects(out)
	if err != nil {
		k.t.Fatalf("decoding `kubectl kustomize %s`: %v", dir, err)
	}
	return objs
}

// decodeObjects decodes a multi-document YAML stream.
func decodeObjects(stream string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}
