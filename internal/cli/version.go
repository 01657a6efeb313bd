package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/version"
)

// managerLabels select the manager's Pods (config/manager).
var managerLabels = client.MatchingLabels{"app.kubernetes.io/name": "uprev", "app.kubernetes.io/component": "manager"}

// managerContainer is the name of the manager's container (config/manager).
const managerContainer = "manager"

// versionInfo is what `uprev version -o json` prints.
type versionInfo struct {
	// ClientVersion is this binary's version.
	ClientVersion string `json:"clientVersion"`
	// Servers are the manager Pods found with --manager.
	Servers []serverVersion `json:"servers,omitempty"`
}

// serverVersion is the version one manager Pod runs.
type serverVersion struct {
	// Pod is the Pod's name.
	Pod string `json:"pod"`
	// Image is the manager container's image, whose tag is the version
	// the release published.
	Image string `json:"image"`
	// ImageID is the image the container runs, by digest, once it started.
	ImageID string `json:"imageID,omitempty"`
}

// versionOptions are the flags of `uprev version`.
type versionOptions struct {
	cluster   *clusterFlags
	server    bool
	output    string
	namespace string
}

// newVersionCommand returns `uprev version`, which prints the version and,
// with --manager, the managers'; it never starts the manager.
func newVersionCommand(opts Options) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of uprev, and of the managers with --manager",
		Long: `Prints the version of this binary: the one 'make release' stamped in (from
'git describe'), else the module version Go recorded, else "(devel)".

With --manager, also the image each manager Pod runs (the Pods labelled
app.kubernetes.io/name=uprev and app.kubernetes.io/component=manager in the
manager's namespace), read with your kubeconfig. A running manager also
publishes its version as the metric ` + version.BuildInfoMetric + `{version}.`,
		Example: `  uprev version
  uprev version --manager -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), opts.Out, opts.ErrOut)
		},
	}
	o.cluster = newClusterFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.server, "manager", false, "Also print the version of the manager Pods of the cluster.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json; default: text.")
	cmd.Flags().StringVar(&o.namespace, "manager-namespace", "uprev-system", "The namespace the manager runs in, for --manager.")
	return cmd
}

// run prints the versions.
func (o *versionOptions) run(ctx context.Context, out, errOut io.Writer) error {
	if o.output != "" && o.output != outputJSON {
		return fmt.Errorf("unknown output format %q: want json", o.output)
	}
	info := versionInfo{ClientVersion: version.Version()}
	if o.server {
		servers, err := o.servers(ctx, errOut)
		if err != nil {
			return err
		}
		info.Servers = servers
	}
	if o.output == outputJSON {
		b, err := marshalJSON(info)
		if err != nil {
			return fmt.Errorf("writing json: %w", err)
		}
		_, err = out.Write(b)
		return err
	}
	if !o.server {
		_, err := fmt.Fprintln(out, info.ClientVersion)
		return err
	}
	lines := []string{"Client: " + info.ClientVersion}
	if len(info.Servers) == 0 {
		lines = append(lines, "Server: no manager Pod in namespace "+o.namespace)
	}
	for _, s := range info.Servers {
		line := fmt.Sprintf("Server: %s (Pod %s", s.Image, s.Pod)
		if s.ImageID != "" {
			line += ", " + s.ImageID
		}
		lines = append(lines, line+")")
	}
	_, err := fmt.Fprintln(out, strings.Join(lines, "\n"))
	return err
}

// servers reads the manager Pods' images.
func (o *versionOptions) servers(ctx context.Context, warnings io.Writer) ([]serverVersion, error) {
	c, err := o.cluster.client(warnings)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(o.namespace), managerLabels); err != nil {
		return nil, fmt.Errorf("listing the manager's Pods in namespace %s: %w", o.namespace, err)
	}
	var servers []serverVersion
	for _, p := range pods.Items {
		s := serverVersion{Pod: p.Name}
		for _, c := range p.Spec.Containers {
			if c.Name == managerContainer {
				s.Image = c.Image
			}
		}
		for _, st := range p.Status.ContainerStatuses {
			if st.Name == managerContainer {
				s.ImageID = st.ImageID
			}
		}
		if s.Image != "" {
			servers = append(servers, s)
		}
	}
	slices.SortFunc(servers, func(a, b serverVersion) int { return strings.Compare(a.Pod, b.Pod) })
	return servers, nil
}
