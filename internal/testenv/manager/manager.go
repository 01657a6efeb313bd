// Package manager builds the uprev binary and runs it as a separate process
// for tests that need the real manager: its flags, its own output, and
// being stopped and started again.
package manager

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/filelock"
	"github.com/uprev-dev/uprev/internal/testenv/reporoot"
)

// programs are the programs this test process built, by name.
var programs struct {
	sync.Mutex
	built map[string]*program
}

// program is one program built for the tests.
type program struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// buildCommand returns the `go build` of the repository's package pkg
// into out, built as `make build`, the image and the test programs of
// bin/ are: static (CGO_ENABLED=0) and trimmed (-trimpath). Every binary
// the tests build has these settings, so that from empty caches each
// package compiles once for them all, not once per setting.
func buildCommand(out, pkg string) *exec.Cmd {
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = reporoot.Dir()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}

// Build builds the uprev binary (Program of the repository's root
// package) and returns its path.
func Build(t testing.TB) string {
	t.Helper()
	return Program(t, ".", "uprev")
}

// Program builds the repository's package pkg (buildCommand) into
// bin/test/name, ignored by Git, once per test process, and returns its
// path. The test packages that `go test` runs side by side share it: each
// builds under an exclusive lock of bin/test/name.lock, so the first links
// it and the others find it up to date (go build leaves alone a binary
// whose build ID matches, in a second instead of a link's ten). A binary
// another package is running is never written into: a new build replaces
// the file, it does not rewrite it.
func Program(t testing.TB, pkg, name string) string {
	t.Helper()
	programs.Lock()
	p, ok := programs.built[name]
	if !ok {
		if programs.built == nil {
			programs.built = map[string]*program{}
		}
		p = &program{path: filepath.Join(reporoot.Dir(), "bin", "test", name)}
		programs.built[name] = p
	}
	programs.Unlock()
	p.once.Do(func() { p.out, p.err = p.build(pkg) })
	if p.err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, p.err, p.out)
	}
	return p.path
}

// build builds pkg into p.path under the lock of p.path.
func (p *program) build(pkg string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(p.path), 0o755); err != nil {
		return nil, err
	}
	lock, err := filelock.Lock(p.path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("locking the build: %w", err)
	}
	defer func() { _ = lock.Close() }()
	return buildCommand(p.path, pkg).CombinedOutput()
}

// Process is one running manager.
type Process struct {
	// LogPath is the file that holds everything the manager wrote to
	// stdout and stderr.
	LogPath string

	cmd     *exec.Cmd
	stopped bool
}

// Start runs the binary at bin against the cluster of kubeconfig with
// storage as its --storage-path, debug logs, no metrics or probe ports,
// and the given extra flags. It is stopped when the test ends.
func Start(t testing.TB, bin, kubeconfig, storage string, flags ...string) *Process {
	t.Helper()
	args := append([]string{"--storage-path=" + storage, "--metrics-addr=0", "--health-addr=0", "--log-level=debug"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	logs, err := os.Create(filepath.Join(t.TempDir(), "uprev.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logs.Close() }() // the process writes through its own handle
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting uprev: %v", err)
	}
	p := &Process{LogPath: logs.Name(), cmd: cmd}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("uprev log:\n%s", p.Logs(t))
		}
	})
	return p
}

// Stop interrupts the manager and waits for it to exit.
func (p *Process) Stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(os.Interrupt)
	_ = p.cmd.Wait()
}

// Kill ends the manager with SIGKILL, as a crash or an OOM kill would:
// it gets no chance to clean up.
func (p *Process) Kill() {
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// Logs returns what the manager wrote so far.
func (p *Process) Logs(t testing.TB) string {
	t.Helper()
	out, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatalf("reading the manager's log: %v", err)
	}
	return string(out)
}

// Cluster is a control plane started for a test of the manager binary.
type Cluster struct {
	*cluster.Cluster
	// KubeConfigPath is an administrator's kubeconfig file, for the
	// manager's KUBECONFIG.
	KubeConfigPath string
	// Client reaches the cluster as an administrator, with every kind
	// uprev serves.
	Client client.Client
}

// StartCluster starts a control plane for one test, stopped when it ends.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := connect(cluster.StartT(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewCluster starts a control plane that a package's tests share, from its
// TestMain: the administrator's kubeconfig is written into dir, and the
// caller stops the cluster with Stop.
func NewCluster(dir string) (*Cluster, error) {
	c, err := cluster.Start()
	if err != nil {
		return nil, err
	}
	shared, err := connect(c, dir)
	if err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return shared, nil
}

// connect writes c's administrator kubeconfig into dir and makes the
// administrator's client.
func connect(c *cluster.Cluster, dir string) (*Cluster, error) {
	kubeconfig, err := c.KubeConfig()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return nil, fmt.Errorf("writing the kubeconfig: %w", err)
	}
	scheme, err := controllers.NewScheme()
	if err != nil {
		return nil, err
	}
	k8s, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return &Cluster{Cluster: c, KubeConfigPath: path, Client: k8s}, nil
}

// RunSuite is the TestMain of a package whose tests share one control
// plane: it starts the cluster in a temporary directory named after name,
// hands it to use (which keeps what the tests need of it), runs the tests
// and stops it. It returns the exit code for os.Exit.
func RunSuite(m *testing.M, name string, use func(*Cluster) error) int {
	dir, err := os.MkdirTemp("", "uprev-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }() // a temporary directory
	c, err := NewCluster(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
	}()
	if err := use(c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
