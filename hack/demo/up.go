package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/hack/demo/internal/notify"
	"github.com/uprev-dev/uprev/internal/fleet"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// The demo's clusters: uprev runs in management and applies to the others.
const (
	management = "management"
	eu1        = "eu-1"
	us1        = "us-1"
)

// clusterNames are the demo's clusters, in the order they are printed.
var clusterNames = []string{management, eu1, us1}

// Where the demo's objects are.
const (
	// namespace is uprev's namespace (config/), where the demo's
	// ImageRepositories, ImagePolicies, UpdateAutomation and Sync are.
	namespace = "uprev-system"
	// serviceAccount is uprev's ServiceAccount (config/rbac), which the
	// manager runs as.
	serviceAccount = "uprev"
	// automationName and syncName are the demo's UpdateAutomation and Sync
	// (examples/getting-started/fleet/management).
	automationName = "fleet"
	syncName       = "agent"
	// fleetRepo is the Git repository's name on the Git server.
	fleetRepo = "fleet"
	// firstVersion is the release in the registry when the demo starts.
	firstVersion = "1.0.0"
)

// Placeholders of examples/getting-started, replaced by the demo's servers.
const (
	registryPlaceholder = "registry.example.com"
	gitPlaceholder      = "http://git.example.com/fleet.git"
)

// demo is a running fleet and what stops it.
type demo struct {
	o     options
	out   io.Writer
	logs  *os.File
	state state

	reg      *registry.Registry
	git      *gitserver.Server
	clusters map[string]*cluster.Cluster
	// mgmt reaches the management cluster as an administrator.
	mgmt client.Client

	// webhook is where the manager's webhook receivers listen, once it
	// does (enableWebhooks).
	webhook atomic.Pointer[notify.Endpoint]

	manager     *exec.Cmd
	managerDone chan struct{}
	managerErr  error
}

// up brings up the fleet, prints where everything is and the script, and
// waits until ctx ends (a signal) or the manager exits; then it stops
// everything and removes the state directory.
func up(ctx context.Context, o options, out io.Writer) (err error) {
	d := &demo{o: o, out: out, clusters: map[string]*cluster.Cluster{}}
	if err := d.prepareStateDir(); err != nil {
		return err
	}
	defer func() {
		if err == nil && d.managerErr != nil {
			err = d.managerErr
		}
		// A failed demo keeps its logs for a person to read; the next
		// `demo up` or `demo down` removes them.
		d.stop(err == nil)
	}()
	if err := d.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while starting
		}
		return err
	}
	select {
	case <-ctx.Done():
	case <-d.managerDone:
		d.managerErr = fmt.Errorf("the uprev manager exited: %v; its log:\n%s", d.manager.ProcessState, tail(d.state.ManagerLog, 30))
	}
	return nil
}

// prepareStateDir makes an empty state directory with a state file naming
// this process, refusing when another demo runs there.
func (d *demo) prepareStateDir() error {
	if s, err := readState(d.o.stateDir); err == nil {
		if running(s.PID, s.Command) {
			return fmt.Errorf("a demo is already running (pid %d, %s); stop it with `make demo-down`", s.PID, d.o.stateDir)
		}
		killLeftovers(s, d.out)
	}
	if err := os.RemoveAll(d.o.stateDir); err != nil {
		return err
	}
	if err := os.MkdirAll(d.o.stateDir, 0o755); err != nil {
		return err
	}
	name, _ := processName(os.Getpid())
	if name == "" {
		name = filepath.Base(os.Args[0])
	}
	d.state = state{PID: os.Getpid(), Command: name, KubeConfigs: map[string]string{}}
	logs, err := os.Create(d.path("demo.log"))
	if err != nil {
		return err
	}
	d.logs = logs
	return d.state.write(d.o.stateDir)
}

// path returns name in the state directory.
func (d *demo) path(name string) string {
	return filepath.Join(d.o.stateDir, name)
}

// say prints one step of the start-up.
func (d *demo) say(format string, args ...any) {
	_, _ = fmt.Fprintf(d.out, "==> "+format+"\n", args...)
}

// start brings up everything, in order, and prints the result.
func (d *demo) start(ctx context.Context) error {
	for _, bin := range []string{d.o.uprev, filepath.Join(d.o.assets, "kubectl")} {
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("%s is missing: run `make build controlplane` (make demo does)", bin)
		}
	}
	if _, err := os.Stat(filepath.Join(d.o.root, "examples", "getting-started", "fleet")); err != nil {
		return fmt.Errorf("run the demo from the repository root (or pass --root): %w", err)
	}
	steps := []struct {
		what string
		do   func(context.Context) error
	}{
		{"Starting an OCI registry with acme/agent:" + firstVersion + " and charts/agent:" + firstVersion, d.startRegistry},
		{"Starting a Git server with examples/getting-started/fleet", d.startGit},
		{"Starting three control planes (kube-apiserver + etcd): management, eu-1, us-1", d.startClusters},
		{"Installing uprev's CRDs and RBAC from config/ with kubectl", d.install},
		{"Starting bin/uprev with the flags of config/manager, as ServiceAccount uprev-system/uprev", d.startManager},
		{"Applying management/ of the fleet repository: ImageRepositories, ImagePolicies, the UpdateAutomation", d.applyAutomation},
		{"Applying the Sync; waiting for the first rollout to reach eu-1, then us-1", d.applySync},
	}
	for _, s := range steps {
		d.say("%s", s.what)
		if err := s.do(ctx); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return d.printReady(ctx)
}

// applyAutomation applies what management/ of the fleet repository holds
// besides the Sync, and waits for the automation's first commit: the
// agent's image pinned by digest and the chart's CRDs.
func (d *demo) applyAutomation(ctx context.Context) error {
	dir := filepath.Join(d.state.Clone, "management")
	if err := d.kubectl(ctx, d.state.KubeConfigs[management], "apply",
		"-f", filepath.Join(dir, "images.yaml"), "-f", filepath.Join(dir, "updateautomation.yaml")); err != nil {
		return err
	}
	return d.waitFor(ctx, "the automation's first commit", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var auto uprevv1.UpdateAutomation
		if err := d.mgmt.Get(ctx, client.ObjectKey{Namespace: namespace, Name: automationName}, &auto); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return auto.Status.LastPushCommit != "", nil
	})
}

// applySync applies the Sync and waits until both targets applied the
// automation's commit.
func (d *demo) applySync(ctx context.Context) error {
	if err := d.kubectl(ctx, d.state.KubeConfigs[management], "apply", "-f", filepath.Join(d.state.Clone, "management", "sync.yaml")); err != nil {
		return err
	}
	var auto uprevv1.UpdateAutomation
	if err := d.mgmt.Get(ctx, client.ObjectKey{Namespace: namespace, Name: automationName}, &auto); err != nil {
		return err
	}
	commit := auto.Status.LastPushCommit
	return d.waitFor(ctx, "the first rollout", 2*time.Minute, func(ctx context.Context) (bool, error) {
		syncs := make([]uprevv1.Sync, 1)
		if err := d.mgmt.Get(ctx, client.ObjectKey{Namespace: namespace, Name: syncName}, &syncs[0]); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if err := fleet.AttachTargets(ctx, d.mgmt, syncs); err != nil {
			return false, err
		}
		applied := 0
		for _, t := range syncs[0].Status.Targets {
			if strings.HasSuffix(t.LastAppliedRevision, commit) {
				applied++
			}
		}
		return applied == 2, nil
	})
}

// waitFor polls done until it is true, fails, or timeout passes.
func (d *demo) waitFor(ctx context.Context, what string, timeout time.Duration, done func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (see %s and %s)", what, ctx.Err(), d.path("uprev.log"), d.path("demo.log"))
		case <-d.managerDone:
			return fmt.Errorf("waiting for %s: the manager exited; its log:\n%s", what, tail(d.state.ManagerLog, 30))
		case <-tick.C:
		}
	}
}

// kubectl runs kubectl against the cluster of kubeconfig from the
// repository root, logging its output to demo.log.
func (d *demo) kubectl(ctx context.Context, kubeconfig string, args ...string) error {
	return d.run(ctx, filepath.Join(d.o.assets, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
}

// run runs a command from the repository root, logging its output to
// demo.log; its error holds that output.
func (d *demo) run(ctx context.Context, name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = d.o.root
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	_, _ = fmt.Fprintf(d.logs, "$ %s %s\n%s", name, strings.Join(args, " "), out.String())
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String())
	}
	return nil
}

// stop stops everything that started, the manager first, and removes the
// state directory when remove is true.
func (d *demo) stop(remove bool) {
	d.say("Stopping")
	if d.manager != nil {
		_ = d.manager.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.managerDone:
		case <-time.After(45 * time.Second):
			_ = d.manager.Process.Kill()
			<-d.managerDone
		}
	}
	var wg sync.WaitGroup
	for name, c := range d.clusters {
		wg.Go(func() {
			if err := c.Stop(); err != nil {
				_, _ = fmt.Fprintf(d.out, "stopping %s: %v\n", name, err)
			}
		})
	}
	wg.Wait()
	if d.git != nil {
		d.git.Close()
	}
	if d.reg != nil {
		d.reg.Close()
	}
	if d.logs != nil {
		_ = d.logs.Close() // writes to an *os.File are not buffered: nothing is lost
	}
	if !remove {
		d.say("Stopped; the logs are in %s", display(d.o.stateDir))
		return
	}
	if err := os.RemoveAll(d.o.stateDir); err != nil {
		_, _ = fmt.Fprintf(d.out, "removing %s: %v\n", d.o.stateDir, err)
	}
	d.say("Stopped; removed %s", display(d.o.stateDir))
}

// tail returns the last n lines of file.
func tail(file string, n int) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
