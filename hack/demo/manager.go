package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/testenv/freeport"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// startManager runs bin/uprev with the arguments of config/manager's
// Deployment, as uprev's ServiceAccount, and waits until it is ready.
// Outside a Pod a few flags must change: where it stores data, the ports it
// listens on (free ones of 127.0.0.1), and the namespace of its leader
// election Lease (a Pod's own namespace, otherwise). It also listens for
// webhooks (enableWebhooks), which config/manager leaves off.
func (d *demo) startManager(ctx context.Context) error {
	args, err := managerArgs(filepath.Join(d.o.root, "config", "manager", "manager.yaml"))
	if err != nil {
		return err
	}
	metricsAddr, err := freeport.Reserve()
	if err != nil {
		return err
	}
	healthAddr, err := freeport.Reserve()
	if err != nil {
		return err
	}
	args = setFlag(args, "--storage-path", d.path("storage"))
	args = setFlag(args, "--metrics-addr", metricsAddr)
	args = setFlag(args, "--health-addr", healthAddr)
	args = setFlag(args, "--leader-election-namespace", namespace)
	webhookAddr, err := freeport.Reserve()
	if err != nil {
		return err
	}
	args = setFlag(args, "--webhook-addr", webhookAddr)
	if err := d.enableWebhooks(ctx, webhookAddr); err != nil {
		return err
	}

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
	defer func() { _ = logs.Close() }() // the process writes through its own handle
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
	health := outbound.Installed().Client(5 * time.Second)
	return d.waitFor(ctx, "the manager to be ready", time.Minute, func(context.Context) (bool, error) {
		resp, err := health.Get("http://" + healthAddr + "/readyz")
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close() // the status is all it needs
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
