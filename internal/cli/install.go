package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/uprev-dev/uprev/internal/install"
	"github.com/uprev-dev/uprev/internal/version"
)

// installLong is the help of `uprev install`.
const installLong = `Installs uprev on the cluster of your kubeconfig, as 'flux install' installs
Flux: config/default of this version of uprev (the CRDs, the RBAC and the
manager Deployment), carried inside the binary and built with kustomize, the
manager's image pinned to this binary's version.

The objects are applied with server-side apply (field manager "uprev"): the
Namespace, CRDs and ClusterRoles first, waiting until the CRDs are
established, then the rest; with --wait (the default) it then waits until
the manager's Deployment is available. Running it again upgrades the install
to this binary's version.

With --export it applies nothing and prints the manifests instead, for
'kubectl apply -f -' or a GitOps repository.`

// installExample is the example of `uprev install`.
const installExample = `  uprev install
  uprev install --export > uprev.yaml
  uprev install --export | kubectl apply --server-side -f -
  uprev install --multitenant --namespace platform-uprev
  uprev install --image registry.example.com/platform/uprev --version v0.4.0
  uprev install --image uprev:dev     # an image loaded into kind or k3d`

// installPollInterval is how often `uprev install` polls the objects'
// status while it waits.
const installPollInterval = 2 * time.Second

// installOptions are the flags of `uprev install`.
type installOptions struct {
	cluster     *clusterFlags
	export      bool
	multitenant bool
	image       string
	version     string
	wait        bool
	timeout     time.Duration
}

// newInstallCommand returns `uprev install`.
func newInstallCommand(opts Options) *cobra.Command {
	o := &installOptions{}
	cmd := &cobra.Command{
		Use:     "install",
		Short:   "Install or upgrade uprev on a cluster, or print its manifests (--export)",
		Long:    installLong,
		Example: installExample,
		GroupID: groupManager,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.Flags(), opts.Out, opts.ErrOut)
		},
	}
	fs := cmd.Flags()
	o.cluster = newClusterFlags(fs)
	setNamespaceUsage(fs, "The namespace to install uprev into.")
	fs.BoolVar(&o.export, "export", false, "Print the manifests instead of applying them.")
	fs.BoolVar(&o.multitenant, "multitenant", false, "Install config/multitenant, the lockdown for a cluster several teams share (docs/security.md).")
	fs.StringVar(&o.image, "image", install.ConfigImage, "The manager's image: a name, tagged with --version, or a name with its own tag or digest.")
	fs.StringVar(&o.version, "version", "", "The manager image's tag; default: this binary's version.")
	fs.BoolVar(&o.wait, "wait", true, "Wait until the CRDs are established and the manager's Deployment is available.")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "How long to wait for the CRDs to be established and, with --wait, for the install to be ready.")
	return cmd
}

// setNamespaceUsage says what -n/--namespace means for install and check,
// which default to install.DefaultNamespace, not the context's namespace.
func setNamespaceUsage(fs *pflag.FlagSet, usage string) {
	fs.Lookup("namespace").Usage = usage + " Default: " + install.DefaultNamespace + "."
}

// installNamespace returns -n if given, else install.DefaultNamespace.
func installNamespace(fs *pflag.FlagSet) string {
	if f := fs.Lookup("namespace"); f != nil && f.Changed {
		return f.Value.String()
	}
	return install.DefaultNamespace
}

// manifests builds the install the flags ask for.
func (o *installOptions) manifests(fs *pflag.FlagSet) (*install.Manifests, error) {
	tag := o.version
	if tag == "" {
		tag = version.Version()
	}
	image, err := install.ParseImage(o.image, tag)
	if err != nil && o.version == "" {
		return nil, fmt.Errorf("this uprev is a development build (%s), whose image is not published: give --version (such as v0.1.0), or --image with a tag", version.Version())
	}
	if err != nil {
		return nil, err
	}
	variant := install.VariantDefault
	if o.multitenant {
		variant = install.VariantMultiTenant
	}
	return install.Build(install.Options{Variant: variant, Image: image.String(), Namespace: installNamespace(fs)})
}

// run builds the install and prints or applies it.
func (o *installOptions) run(ctx context.Context, fs *pflag.FlagSet, out, errOut io.Writer) error {
	m, err := o.manifests(fs)
	if err != nil {
		return err
	}
	if o.export {
		if _, err := fmt.Fprintf(out, "# uprev %s: CRDs, RBAC and the manager (%s) in namespace %s.\n", version.Version(), m.Image, m.Namespace); err != nil {
			return err
		}
		_, err := out.Write(m.YAML)
		return err
	}
	log := checkLog{w: errOut}
	log.action("installing uprev (%s) in namespace %s", m.Image, m.Namespace)
	cfg, err := o.cluster.restConfig(errOut)
	if err != nil {
		return err
	}
	applier, err := install.NewApplier(cfg)
	if err != nil {
		return err
	}
	applyOpts := install.ApplyOptions{Timeout: o.timeout, Interval: installPollInterval}
	cs, err := applier.Apply(ctx, m, applyOpts)
	if cs != nil {
		for _, e := range cs.Entries {
			_, _ = fmt.Fprintln(errOut, e.String())
		}
	}
	if err != nil {
		log.failure("install failed")
		return err
	}
	if o.wait {
		log.waiting("waiting for the install to be ready (the manager's Deployment available)")
		if err := applier.Wait(ctx, m, applyOpts); err != nil {
			log.failure("install failed")
			return err
		}
		log.success("uprev is ready")
	}
	log.success("install finished")
	return nil
}
