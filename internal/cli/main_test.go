package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/testlog"
)

// The cluster the commands of most tests run against: a real
// kube-apiserver, started once for the package. No manager runs there, so
// the status a test writes stays as written.
var (
	// k8s reaches it as an administrator.
	k8s client.Client
	// kubeconfigFlag points the commands at it.
	kubeconfigFlag string
)

// now is the time of the commands' clock: three days after the tests
// started and half an hour, so that every object the tests create is "3d"
// old (kubectl's ages say "3d1h" from 73 hours on), also in a run of the
// package that takes long (-race -count=3).
var now = time.Now().Add(72*time.Hour + 30*time.Minute)

func TestMain(m *testing.M) {
	os.Exit(testlog.Run("cli", func() int { return runSuite(m) }))
}

// runSuite starts the control plane, runs the tests and stops it.
func runSuite(m *testing.M) int {
	c, err := cluster.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
	}()
	kc, err := c.KubeConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "uprev-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }() // a temporary directory
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeconfigFlag = "--kubeconfig=" + path
	scheme, err := controllers.NewScheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if k8s, err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// result is what one run of the command line printed, and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// uprev runs the command line args in process, as the binary runs it, with
// the clock at now.
func uprev(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Execute(t.Context(), args, Options{
		IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr},
		Clock:     clocktesting.NewFakeClock(now),
	})
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// runs counts the namespaces newNamespace made per name, so that a test run
// again (-count) gets a namespace of its own too.
var runs = map[string]int{}

// newNamespace creates a namespace of its own for one test, named after
// it (and, when the test runs again, the run).
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	name = name[:min(len(name), 50)]
	runs[name]++
	if n := runs[name]; n > 1 {
		name = fmt.Sprintf("%s-%d", name, n)
	}
	return createNamespace(t, name)
}

// createNamespace creates the namespace name.
func createNamespace(t *testing.T, name string) string {
	t.Helper()
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

// table joins lines into what a command prints: each ended by a newline.
func table(lines ...string) string {
	return strings.Join(lines, "\n") + "\n"
}
