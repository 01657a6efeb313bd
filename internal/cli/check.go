package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/install"
)

// minKubernetes is the oldest Kubernetes uprev supports (docs/install.md,
// "Supported versions"): its CRDs use CEL validation rules.
const minKubernetes = "1.29.0"

// checkLong is the help of `uprev check`.
const checkLong = `Checks that uprev can be installed on the cluster of your kubeconfig, or that
it is installed and running, as 'flux check' does for Flux. Each check
prints a line, ✔ when it passes and ✗ when it fails (on stderr); the command
exits 1 when any check fails.

With --pre, before installing: the cluster's Kubernetes version (` + minKubernetes + ` or
later) and your rights to create and patch every object 'uprev install'
applies (CRDs, ClusterRoles and their bindings, the Namespace, the
Deployment, ...), asked of the API server with SelfSubjectAccessReviews.

Without --pre, after installing: the Kubernetes version; the manager's
Deployment is available; its leader election Lease is held and renewed
within its duration; the metrics Service (and the webhook Service, when
installed) has ready endpoints; and every CRD is installed, established and
current: the versions it serves and stores, and their schemas, are this
uprev's. An older CRD means 'uprev install' (or the manifests of this
version) has not been applied yet.`

// checkOptions are the flags of `uprev check`.
type checkOptions struct {
	cluster *clusterFlags
	pre     bool
}

// newCheckCommand returns `uprev check`.
func newCheckCommand(opts Options) *cobra.Command {
	o := &checkOptions{}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check that uprev can be installed (--pre), or that it is installed and running",
		Long:  checkLong,
		Example: `  uprev check --pre
  uprev check
  uprev check --namespace platform-uprev`,
		GroupID: groupManager,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.Flags(), opts.ErrOut, opts.Clock)
		},
	}
	o.cluster = newClusterFlags(cmd.Flags())
	setNamespaceUsage(cmd.Flags(), "The namespace uprev is installed in.")
	cmd.Flags().BoolVar(&o.pre, "pre", false, "Check only the prerequisites of an install: the Kubernetes version and your rights.")
	return cmd
}

// checkLog prints the lines of `uprev check` and `uprev install` as flux
// does, and remembers whether a check failed.
type checkLog struct {
	w      io.Writer
	failed bool
}

// action prints what is being done.
func (l *checkLog) action(format string, args ...any) {
	_, _ = fmt.Fprintf(l.w, "► "+format+"\n", args...)
}

// waiting prints what is being waited for.
func (l *checkLog) waiting(format string, args ...any) {
	_, _ = fmt.Fprintf(l.w, "◎ "+format+"\n", args...)
}

// success prints a check that passed.
func (l *checkLog) success(format string, args ...any) {
	_, _ = fmt.Fprintf(l.w, "✔ "+format+"\n", args...)
}

// failure prints a check that failed, and remembers it.
func (l *checkLog) failure(format string, args ...any) {
	l.failed = true
	_, _ = fmt.Fprintf(l.w, "✗ "+format+"\n", args...)
}

// run runs the checks; a failed one makes the exit code 1.
func (o *checkOptions) run(ctx context.Context, fs *pflag.FlagSet, errOut io.Writer, clk clock.Clock) error {
	// The image plays no part in the checks.
	m, err := install.Build(install.Options{Version: "check", Namespace: installNamespace(fs)})
	if err != nil {
		return err
	}
	cfg, err := o.cluster.restConfig(errOut)
	if err != nil {
		return err
	}
	c, err := o.cluster.client(errOut)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	log := &checkLog{w: errOut}
	log.action("checking prerequisites")
	info, err := dc.ServerVersion()
	if err != nil {
		log.failure("Kubernetes version: %v", err)
	} else {
		checkKubernetesVersion(log, info.GitVersion)
	}
	if o.pre {
		checkRights(ctx, log, c, m)
		if log.failed {
			log.failure("prerequisites checks failed")
			return exitCode(1)
		}
		log.success("prerequisites checks passed")
		return nil
	}
	log.action("checking the manager in namespace %s", m.Namespace)
	checkManager(ctx, log, c, m, clk)
	log.action("checking CRDs")
	checkCRDs(ctx, log, c, m)
	if log.failed {
		log.failure("check failed")
		return exitCode(1)
	}
	log.success("all checks passed")
	return nil
}

// checkKubernetesVersion checks that gitVersion, the API server's, is
// minKubernetes or later.
func checkKubernetesVersion(log *checkLog, gitVersion string) {
	v, err := utilversion.ParseGeneric(gitVersion)
	if err != nil {
		log.failure("Kubernetes version %q: %v", gitVersion, err)
		return
	}
	if !v.AtLeast(utilversion.MustParseGeneric(minKubernetes)) {
		log.failure("Kubernetes %s <%s: uprev needs %s or later (docs/install.md, Supported versions)", v, minKubernetes, minKubernetes)
		return
	}
	log.success("Kubernetes %s >=%s", v, minKubernetes)
}

// checkRights asks the API server whether the user may create and patch
// (server-side apply) every kind of object of m, where m puts it.
func checkRights(ctx context.Context, log *checkLog, c client.Client, m *install.Manifests) {
	type target struct{ group, resource, namespace string }
	var targets []target
	for _, obj := range m.Objects {
		gvk := obj.GroupVersionKind()
		mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			log.failure("%s: %v", gvk.Kind, err)
			continue
		}
		t := target{group: gvk.Group, resource: mapping.Resource.Resource}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			t.namespace = obj.GetNamespace()
		}
		if !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	var allowed []string
	for _, t := range targets {
		name := t.resource
		if t.group != "" {
			name += "." + t.group
		}
		var denied []string
		for _, verb := range []string{"create", "patch"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: t.group, Resource: t.resource, Namespace: t.namespace},
			}}
			if err := c.Create(ctx, review); err != nil {
				log.failure("asking whether you may %s %s: %v", verb, name, err)
				return
			}
			if !review.Status.Allowed {
				denied = append(denied, verb)
			}
		}
		where := "cluster-wide"
		if t.namespace != "" {
			where = "in namespace " + t.namespace
		}
		if len(denied) > 0 {
			log.failure("you may not %s %s %s, which uprev install applies", strings.Join(denied, " or "), name, where)
			continue
		}
		allowed = append(allowed, name)
	}
	if len(allowed) == len(targets) {
		log.success("you may create and patch %s", strings.Join(allowed, ", "))
	}
}

// checkCRDs checks that every CRD of m is installed and current.
func checkCRDs(ctx context.Context, log *checkLog, c client.Client, m *install.Manifests) {
	for _, want := range m.CRDs() {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(want.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKey{Name: want.GetName()}, got); err != nil {
			if apierrors.IsNotFound(err) {
				log.failure("%s: not installed", want.GetName())
				continue
			}
			log.failure("%s: %v", want.GetName(), err)
			continue
		}
		diff, err := install.CRDDifference(want, got)
		switch {
		case err != nil:
			log.failure("%s: %v", want.GetName(), err)
		case diff != "":
			log.failure("%s: %s: run uprev install to upgrade it", want.GetName(), diff)
		default:
			log.success("%s: %s, current", want.GetName(), install.DescribeVersions(got))
		}
	}
}
