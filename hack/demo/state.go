package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/uprev-dev/uprev/hack/demo/internal/notify"
)

// stateFile is the name of the state file in the state directory.
const stateFile = "state.json"

// state is what state.json records of a running demo: where everything is,
// and every process it started, so `demo down` can stop them.
type state struct {
	// PID is the demo's own process, which `demo down` signals.
	PID int `json:"pid"`
	// Command is the demo process's name, checked before signalling PID.
	Command string `json:"command"`
	// Processes are the processes the demo started: the manager, and
	// etcd and kube-apiserver of each control plane.
	Processes []process `json:"processes,omitempty"`
	// KubeConfigs are the administrators' kubeconfig files by cluster
	// name, and the manager's ("uprev").
	KubeConfigs map[string]string `json:"kubeconfigs,omitempty"`
	// Registry is the OCI registry's host:port.
	Registry string `json:"registry,omitempty"`
	// GitURL is the clone URL of the fleet repository.
	GitURL string `json:"gitURL,omitempty"`
	// Clone is a clone of GitURL to look at and to push reverts from.
	Clone string `json:"clone,omitempty"`
	// Manager is the manager's command line.
	Manager []string `json:"manager,omitempty"`
	// ManagerLog holds everything the manager writes.
	ManagerLog string `json:"managerLog,omitempty"`
	// Metrics is the manager's Prometheus endpoint (HTTPS, for a bearer
	// token allowed GET /metrics).
	Metrics string `json:"metrics,omitempty"`
	// Webhook is where the manager's webhook receivers listen, and their
	// token: push-tag notifies them of the releases it pushes.
	Webhook *notify.Endpoint `json:"webhook,omitempty"`
	// Ready is true once the fleet is up and the script printed.
	Ready bool `json:"ready"`
}

// process is one process the demo started.
type process struct {
	PID  int    `json:"pid"`
	Name string `json:"name"`
}

// write writes s as dir/state.json, replacing the file at once.
func (s *state) write(dir string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the state file: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

// readState reads dir/state.json.
func readState(dir string) (*state, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, stateFile), err)
	}
	return &s, nil
}

// down stops the demo whose state is in o.stateDir: it signals the demo,
// which stops everything it started and removes the state directory, and
// waits for it to exit. Processes left by a demo that could not clean up
// (it was killed) are killed, and the state directory is removed.
func down(o options, out io.Writer) error {
	s, err := readState(o.stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		_, _ = fmt.Fprintf(out, "No demo is running (no %s).\n", filepath.Join(o.stateDir, stateFile))
		return nil
	}
	if err != nil {
		return err
	}
	if running(s.PID, s.Command) {
		_, _ = fmt.Fprintf(out, "Stopping the demo (pid %d)...\n", s.PID)
		if err := syscall.Kill(s.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signalling the demo: %w", err)
		}
		if !waitGone(2*time.Minute, s.PID, s.Command) {
			_, _ = fmt.Fprintf(out, "The demo did not stop in 2 minutes; killing it.\n")
			_ = syscall.Kill(s.PID, syscall.SIGKILL)
			waitGone(10*time.Second, s.PID, s.Command)
		}
	}
	killLeftovers(s, out)
	if err := os.RemoveAll(o.stateDir); err != nil {
		return fmt.Errorf("removing %s: %w", o.stateDir, err)
	}
	_, _ = fmt.Fprintln(out, "The demo is down.")
	return nil
}

// killLeftovers kills the processes of s that still run: a demo that was
// killed itself could not stop them.
func killLeftovers(s *state, out io.Writer) {
	for _, p := range s.Processes {
		if running(p.PID, p.Name) {
			_, _ = fmt.Fprintf(out, "Killing %s (pid %d), left behind.\n", p.Name, p.PID)
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			waitGone(10*time.Second, p.PID, p.Name)
		}
	}
}

// waitGone waits up to timeout for process pid, named name, to exit.
func waitGone(timeout time.Duration, pid int, name string) bool {
	deadline := time.Now().Add(timeout)
	for running(pid, name) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// running reports whether process pid runs (and is no zombie) with the
// name name, so that a PID reused by another program is left alone.
func running(pid int, name string) bool {
	if pid <= 0 {
		return false
	}
	got, ok := processName(pid)
	return ok && got == name
}

// processName returns the name of process pid, as /proc/<pid>/comm or
// `ps -o comm=` gives it; false when it does not run or is a zombie.
func processName(pid int) (string, bool) {
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// pid (comm) state ...: comm may hold spaces and parentheses.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || len(s) < end+3 {
			return "", false
		}
		if s[end+2] == 'Z' || s[end+2] == 'X' {
			return "", false
		}
		return s[open+1 : end], true
	}
	if _, err := os.Stat("/proc/self"); err == nil {
		return "", false // /proc works, and has no such process
	}
	out, err := exec.Command("ps", "-o", "comm=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return "", false
	}
	return filepath.Base(strings.TrimSpace(string(out))), strings.TrimSpace(string(out)) != ""
}

// children returns the processes whose parent is pid, from /proc; none
// where there is no /proc.
func children(pid int) []process {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []process
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		out = append(out, process{PID: child, Name: s[open+1 : end]})
	}
	return out
}
