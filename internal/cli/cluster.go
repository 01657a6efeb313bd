package cli

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/version"
)

// clusterFlags are kubectl's flags for reaching a cluster: --kubeconfig
// (default $KUBECONFIG, then ~/.kube/config), --context, -n/--namespace,
// --as, --server, and the rest, read the way kubectl reads them.
type clusterFlags struct {
	config *genericclioptions.ConfigFlags
}

// newClusterFlags adds the cluster flags to fs.
func newClusterFlags(fs *pflag.FlagSet) *clusterFlags {
	config := genericclioptions.NewConfigFlags(true)
	config.CacheDir = nil // uprev keeps no discovery cache
	config.AddFlags(fs)
	return &clusterFlags{config: config}
}

// client returns a client of the cluster that knows every kind uprev
// serves and can watch them; the API server's warnings go to warnings, as
// kubectl prints them.
func (f *clusterFlags) client(warnings io.Writer) (client.WithWatch, error) {
	cfg, err := f.restConfig(warnings)
	if err != nil {
		return nil, err
	}
	scheme, err := controllers.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	return c, nil
}

// restConfig returns the configuration that reaches the cluster, with
// uprev's user agent; the API server's warnings go to warnings.
func (f *clusterFlags) restConfig(warnings io.Writer) (*rest.Config, error) {
	cfg, err := f.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	cfg.UserAgent = "uprev/" + version.Version()
	cfg.WarningHandler = rest.NewWarningWriter(warnings, rest.WarningWriterOptions{Deduplicate: true})
	return cfg, nil
}

// namespace returns the namespace the command works in: -n, else the
// kubeconfig context's, else "default".
func (f *clusterFlags) namespace() (string, error) {
	ns, _, err := f.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading kubeconfig: %w", err)
	}
	return ns, nil
}
