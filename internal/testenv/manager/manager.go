// Package manager builds the uprev binary and runs it as a separate process
// for tests that need the real manager: its flags, its own output, and
// being stopped and started again.
package manager

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
	buildOut  []byte
)

// repoRoot returns the repository root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Build builds the uprev binary once per test process and returns its
// path.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "uprev-bin-")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "uprev")
		cmd := exec.Command("go", "build", "-o", built, ".")
		cmd.Dir = repoRoot()
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("building uprev: %v\n%s", buildErr, buildOut)
	}
	return built
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
	defer logs.Close()
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
