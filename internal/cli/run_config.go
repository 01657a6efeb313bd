package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/flowcontrol"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
)

// errNoCluster says where the manager looks for its cluster, in place of
// client-go's advice to set KUBERNETES_MASTER, which uprev does not read.
var errNoCluster = errors.New("no cluster to run against: give --kubeconfig, set KUBECONFIG, or run in a Pod")

// restConfig returns the configuration of the cluster the manager runs
// against: the file of --kubeconfig (and its --context) when given, else
// controller-runtime's search ($KUBECONFIG, the Pod's ServiceAccount,
// ~/.kube/config). As Flux's controllers, it turns client-side rate limits
// off when the API server has priority and fairness, and otherwise takes
// --kube-api-qps and --kube-api-burst.
func (o *managerOptions) restConfig(ctx context.Context) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.kubeconfig != "" || o.kubeContext != "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.kubeconfig
		overrides := &clientcmd.ConfigOverrides{CurrentContext: o.kubeContext}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	} else {
		cfg, err = ctrl.GetConfig()
	}
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, errNoCluster
	case err != nil:
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	if on, err := flowcontrol.IsEnabled(ctx, cfg); err == nil && on {
		cfg.QPS, cfg.Burst = -1, -1
		return cfg, nil
	}
	cfg.QPS, cfg.Burst = o.clientOpts.QPS, o.clientOpts.Burst
	return cfg, nil
}
