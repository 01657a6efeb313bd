// Package cluster starts real Kubernetes control planes (kube-apiserver and
// etcd, built from the Go module proxy by test/controlplane) for tests, with
// uprev's CRDs, Flux's image CRDs and Flux's GitRepository CRD installed.
package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/uprev-dev/uprev/internal/testenv/reporoot"
)

// Cluster is one running control plane.
type Cluster struct {
	// Config reaches the cluster as an administrator.
	Config *rest.Config

	env *envtest.Environment
}

// AssetsDir returns the directory holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS, or bin/k8s at the repository root.
func AssetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(reporoot.Dir(), "bin", "k8s")
}

// Start starts a control plane with the project's CRDs installed, and
// Flux's GitRepository CRD, as on a cluster with source-controller. It
// fails, saying how to build them, when the control-plane binaries are
// missing.
func Start() (*Cluster, error) {
	crds := filepath.Join(reporoot.Dir(), "config", "crd")
	return start(AssetsDir(), []string{filepath.Join(crds, "bases"), filepath.Join(crds, "gitrepository")})
}

// StartWithClusterAPI starts a control plane as Start does, with Cluster
// API's Cluster CRD (cluster.x-k8s.io, v1beta1 and v1beta2, from Cluster
// API 1.14; `make cluster-api-crd` refreshes it) installed too, as on a
// management cluster: for Syncs that select Clusters.
func StartWithClusterAPI() (*Cluster, error) {
	crds := filepath.Join(reporoot.Dir(), "config", "crd")
	capi := filepath.Join(reporoot.Dir(), "internal", "testenv", "cluster", "crds", "cluster-api")
	return start(AssetsDir(), []string{filepath.Join(crds, "bases"), filepath.Join(crds, "gitrepository"), capi})
}

// StartEmpty starts a control plane of the kube-apiserver and etcd in
// assets with no CRDs installed, as a new cluster is: for programs that
// install uprev with kubectl themselves (make demo), and for workload
// clusters.
func StartEmpty(assets string) (*Cluster, error) {
	return start(assets, nil)
}

// start starts a control plane of the binaries in assets with the CRDs of
// crdDirs installed.
func start(assets string, crdDirs []string) (*Cluster, error) {
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("control plane binary %s not found in %s: run `make controlplane` (or test/controlplane/build.sh) to build it, or set KUBEBUILDER_ASSETS", bin, assets)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	return &Cluster{Config: cfg, env: env}, nil
}

// StartT starts a control plane for one test and stops it when the test ends.
func StartT(t testing.TB) *Cluster {
	t.Helper()
	c, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping control plane: %v", err)
		}
	})
	return c
}

// Stop stops the control plane.
func (c *Cluster) Stop() error {
	return c.env.Stop()
}

// KubeConfig returns a kubeconfig for an administrator of the cluster, as
// users put in a Secret for a remote target.
func (c *Cluster) KubeConfig() ([]byte, error) {
	return c.KubeConfigAs("uprev-admin", "system:masters")
}

// KubeConfigAs returns a kubeconfig whose client certificate names user in
// groups. RBAC knows a ServiceAccount by its user name, so
// KubeConfigAs("system:serviceaccount:<namespace>:<name>",
// "system:serviceaccounts", "system:serviceaccounts:<namespace>") acts
// exactly as that ServiceAccount, without a token that expires.
func (c *Cluster) KubeConfigAs(user string, groups ...string) ([]byte, error) {
	u, err := c.env.ControlPlane.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding user %s: %w", user, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("writing kubeconfig: %w", err)
	}
	return kc, nil
}
