package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// startClusters starts the three control planes at once and writes an
// administrator's kubeconfig of each.
func (d *demo) startClusters(ctx context.Context) error {
	var mu sync.Mutex
	var g errgroup.Group
	for _, name := range clusterNames {
		g.Go(func() error {
			c, err := cluster.StartEmpty(d.o.assets)
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
