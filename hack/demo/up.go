package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/hack/demo/internal/release"
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
	fmt.Fprintf(d.out, "==> "+format+"\n", args...)
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

// startRegistry starts the registry and pushes the first release.
func (d *demo) startRegistry(context.Context) error {
	reg, err := registry.New(d.logs)
	if err != nil {
		return err
	}
	d.reg = reg
	d.state.Registry = reg.Host()
	image, err := release.Image(firstVersion)
	if err != nil {
		return err
	}
	chart, err := release.Chart(firstVersion)
	if err != nil {
		return err
	}
	for repo, img := range map[string]v1.Image{release.AgentImage: image, release.AgentChart: chart} {
		tag, err := release.ParseRef(reg.Host() + "/" + repo + ":" + firstVersion)
		if err != nil {
			return err
		}
		if _, err := release.Push(tag, img); err != nil {
			return err
		}
	}
	return d.state.write(d.o.stateDir)
}

// startGit starts the Git server with the fleet repository:
// examples/getting-started/fleet, its placeholders replaced.
func (d *demo) startGit(context.Context) error {
	root := d.path("git")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	git, err := gitserver.New(root, d.logs)
	if err != nil {
		return err
	}
	d.git = git
	placeholders := strings.NewReplacer(registryPlaceholder, d.reg.Host(), gitPlaceholder, git.HTTPURL(fleetRepo))
	files := map[string]string{}
	src := filepath.Join(d.o.root, "examples", "getting-started", "fleet")
	err = filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = placeholders.Replace(string(data))
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	if d.state.GitURL, err = git.CreateRepo(fleetRepo, "main", files); err != nil {
		return err
	}
	d.state.Clone = d.path("fleet")
	for _, args := range [][]string{
		{"clone", "--quiet", d.state.GitURL, d.state.Clone},
		// The person trying the demo reverts from this clone.
		{"-C", d.state.Clone, "config", "user.name", "Demo User"},
		{"-C", d.state.Clone, "config", "user.email", "demo@example.com"},
		{"-C", d.state.Clone, "config", "pull.ff", "only"},
	} {
		if err := d.run(context.Background(), "git", args...); err != nil {
			return err
		}
	}
	return d.state.write(d.o.stateDir)
}

// startClusters starts the three control planes at once and writes an
// administrator's kubeconfig of each.
func (d *demo) startClusters(ctx context.Context) error {
	var mu sync.Mutex
	var g errgroup.Group
	for _, name := range clusterNames {
		g.Go(func() error {
			c, err := cluster.StartEmpty()
			if err != nil {
				return fmt.Errorf("starting %s: %w", name, err)
			}
			mu.Lock()
			defer mu.Unlock()
			d.clusters[name] = c
			return nil
		})
	}
	err := g.Wait()
	// Whatever started is recorded, so that it is stopped.
	d.state.Processes = append(d.state.Processes, controlPlaneProcesses()...)
	if werr := d.state.write(d.o.stateDir); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	for _, name := range clusterNames {
		kc, err := d.clusters[name].KubeConfig()
		if err != nil {
			return err
		}
		path := d.path(name + ".kubeconfig")
		if err := os.WriteFile(path, kc, 0o600); err != nil {
			return err
		}
		d.state.KubeConfigs[name] = path
	}
	scheme, err := controllers.NewScheme()
	if err != nil {
		return err
	}
	if d.mgmt, err = client.New(d.clusters[management].Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	return d.state.write(d.o.stateDir)
}

// controlPlaneProcesses returns the etcd and kube-apiserver processes
// this process started.
func controlPlaneProcesses() []process {
	var out []process
	for _, p := range children(os.Getpid()) {
		if p.Name == "etcd" || p.Name == "kube-apiserver" {
			out = append(out, p)
		}
	}
	return out
}

// install installs config/'s namespace, CRDs and RBAC in the management
// cluster with kubectl, as a person installing uprev does, and the
// kubeconfigs of eu-1 and us-1 as the Secrets the Sync names.
func (d *demo) install(ctx context.Context) error {
	kc := d.state.KubeConfigs[management]
	for _, args := range [][]string{
		{"apply", "-f", filepath.Join("config", "manager", "namespace.yaml")},
		{"apply", "-k", filepath.Join("config", "crd")},
		{"apply", "-k", filepath.Join("config", "rbac")},
		{"wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"},
	} {
		if err := d.kubectl(ctx, kc, args...); err != nil {
			return err
		}
	}
	for _, target := range []string{eu1, us1} {
		if err := d.kubectl(ctx, kc, "-n", namespace, "create", "secret", "generic", target+"-kubeconfig",
			"--from-file=value="+d.state.KubeConfigs[target]); err != nil {
			return err
		}
	}
	return nil
}

// startManager runs bin/uprev with the arguments of config/manager's
// Deployment, as uprev's ServiceAccount, and waits until it is ready.
// Outside a Pod a few flags must change: where it stores data, the ports it
// listens on (free ones of 127.0.0.1), and the namespace of its leader
// election Lease (a Pod's own namespace, otherwise).
func (d *demo) startManager(ctx context.Context) error {
	args, err := managerArgs(filepath.Join(d.o.root, "config", "manager", "manager.yaml"))
	if err != nil {
		return err
	}
	metricsAddr, err := freeAddr()
	if err != nil {
		return err
	}
	healthAddr, err := freeAddr()
	if err != nil {
		return err
	}
	args = setFlag(args, "--storage-path", d.path("storage"))
	args = setFlag(args, "--metrics-addr", metricsAddr)
	args = setFlag(args, "--health-addr", healthAddr)
	args = setFlag(args, "--leader-election-namespace", namespace)

	sa := "system:serviceaccount:" + namespace + ":" + serviceAccount
	kc, err := d.clusters[management].KubeConfigAs(sa, "system:serviceaccounts", "system:serviceaccounts:"+namespace)
	if err != nil {
		return err
	}
	d.state.KubeConfigs["uprev"] = d.path("uprev.kubeconfig")
	if err := os.WriteFile(d.state.KubeConfigs["uprev"], kc, 0o600); err != nil {
		return err
	}
	d.state.ManagerLog = d.path("uprev.log")
	logs, err := os.Create(d.state.ManagerLog)
	if err != nil {
		return err
	}
	defer logs.Close()
	cmd := exec.Command(d.o.uprev, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.state.KubeConfigs["uprev"])
	cmd.Stdout, cmd.Stderr = logs, logs
	// Its own process group: Ctrl-C in the terminal reaches the demo only,
	// which stops the manager before the control planes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", d.o.uprev, err)
	}
	d.manager = cmd
	d.managerDone = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(d.managerDone)
	}()
	d.state.Manager = append([]string{d.o.uprev}, args...)
	d.state.Metrics = "https://" + metricsAddr + "/metrics"
	d.state.Processes = append(d.state.Processes, process{PID: cmd.Process.Pid, Name: filepath.Base(d.o.uprev)})
	if err := d.state.write(d.o.stateDir); err != nil {
		return err
	}
	return d.waitFor(ctx, "the manager to be ready", time.Minute, func(context.Context) (bool, error) {
		resp, err := http.Get("http://" + healthAddr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// managerArgs returns the arguments of the manager container of the
// Deployment in file.
func managerArgs(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var dep appsv1.Deployment
	if err := yaml.Unmarshal(data, &dep); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return c.Args, nil
		}
	}
	return nil, fmt.Errorf("%s has no container named manager", file)
}

// setFlag sets --name=value in args, replacing the flag where it is.
func setFlag(args []string, name, value string) []string {
	i := slices.IndexFunc(args, func(a string) bool { return a == name || strings.HasPrefix(a, name+"=") })
	if i < 0 {
		return append(args, name+"="+value)
	}
	out := slices.Clone(args)
	out[i] = name + "=" + value
	return out
}

// freeAddr returns host:port of a port of 127.0.0.1 free now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
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
	fmt.Fprintf(d.logs, "$ %s %s\n%s", name, strings.Join(args, " "), out.String())
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
				fmt.Fprintf(d.out, "stopping %s: %v\n", name, err)
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
		d.logs.Close()
	}
	if !remove {
		d.say("Stopped; the logs are in %s", display(d.o.stateDir))
		return
	}
	if err := os.RemoveAll(d.o.stateDir); err != nil {
		fmt.Fprintf(d.out, "removing %s: %v\n", d.o.stateDir, err)
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
