package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/plan"
	"github.com/uprev-dev/uprev/internal/update"
)

// planLong is the help of `uprev plan`.
const planLong = `Prints what the next automation run would change in the checkout DIR, one
line per change ("no changes" when there is none), then the held versions and
the refused changes, then, with --kubeconfig, the newest version each
ReleaseGate holds back from a policy. With --notes, then what the pull
request body would say of each image update (Markdown). Writes nothing.

Exit code: 0 when nothing would change, 2 when something would, 1 on error.
See docs/plan.md.`

// planExample shows `uprev plan` at work.
const planExample = `  uprev plan --checkout . --path ./clusters --kubeconfig ~/.kube/config --namespace uprev-system --automation fleet
  uprev plan --checkout . --path ./clusters --refs refs.yaml --namespace uprev-system --push-branch uprev/updates`

// planOptions are the flags of `uprev plan`.
type planOptions struct {
	checkout       string
	path           string
	kubeconfig     string
	kubeContext    string
	namespace      string
	refs           string
	branch         string
	pushBranch     string
	releaseHolds   string
	allowDowngrade bool
	automation     string
	notes          bool
	githubAPI      string
	// gates are the cluster's ReleaseGates, read for --notes.
	gates []uprevv1.ReleaseGate
	// sources are the cluster's ReleaseSources, read for --notes.
	sources []uprevv1.ReleaseSource
	// set names the flags given on the command line, which win over the
	// automation's values.
	set map[string]bool
}

// newPlanCommand returns `uprev plan`.
func newPlanCommand(opts Options) *cobra.Command {
	var o planOptions
	cmd := &cobra.Command{
		Use:     "plan --checkout DIR (--kubeconfig FILE | --refs FILE) [flags]",
		Short:   "Show what the next automation run would change in a checkout",
		Long:    planLong,
		Example: planExample,
		GroupID: groupInspect,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.set = map[string]bool{}
			cmd.Flags().Visit(func(f *pflag.Flag) { o.set[f.Name] = true })
			return o.run(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.checkout, "checkout", "", "The checkout of the repository the automation writes to (required).")
	fs.StringVar(&o.path, "path", ".", "The directory under the checkout whose files the automation updates (its spec.update.path).")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Read the ImagePolicies and ReleaseSources from the cluster of this kubeconfig.")
	fs.StringVar(&o.kubeContext, "context", "", "The kubeconfig context to use; default: its current context.")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "The namespace of the automation: ImagePolicies and ReleaseSources are read from it (default: all namespaces), and markers that name no namespace use it.")
	fs.StringVar(&o.refs, "refs", "", "Read the policies' latest references from this YAML or JSON file instead of a cluster (see docs/plan.md).")
	fs.StringVar(&o.branch, "branch", "", "The branch whose history holds reverts; default: the checkout's current branch.")
	fs.StringVar(&o.pushBranch, "push-branch", "", "The automation's push branch (spec.git.push.branch): reverts on it hold versions too.")
	fs.StringVar(&o.releaseHolds, "release-holds", "", "Release holds, as the annotation "+uprevv1.HoldReleaseAnnotation+` does: "*", or comma-separated "<namespace>/<policy> <version>".`)
	fs.BoolVar(&o.allowDowngrade, "allow-downgrade", false, "Allow changes to lower versions, as spec.allowDowngrade does.")
	fs.BoolVar(&o.notes, "notes", false, "Also print, per update, what its pull request body would say: what the ReleaseGates checked of the new version, and the release notes between the two versions (read anonymously from the registry, from github.com's and gitlab.com's APIs, and from ReleaseSources' servers without their Secrets; $GITHUB_TOKEN is sent to GitHub's when set).")
	fs.StringVar(&o.githubAPI, "github-api", notes.GitHubAPI.URL, "With --notes, the API that serves the releases of sources on github.com.")
	fs.StringVar(&o.automation, "automation", "", "Take --push-branch, --release-holds and --allow-downgrade from this UpdateAutomation (or, when there is none of that name, Flux ImageUpdateAutomation) of --namespace in the --kubeconfig cluster; flags given as well win.")
	return cmd
}

// run computes the plan, prints it to stdout and problems to stderr, and
// ends with the plan's exit code.
func (o *planOptions) run(ctx context.Context, opts Options) error {
	p, err := planCheckout(ctx, o, opts.ErrOut)
	if err != nil {
		return err
	}
	if err := p.Write(opts.Out); err != nil {
		return fmt.Errorf("writing the plan: %w", err)
	}
	if o.notes {
		if err := o.writeNotes(ctx, p, opts.Out); err != nil {
			return err
		}
	}
	for _, e := range p.Result.FileErrors {
		_, _ = fmt.Fprintln(opts.ErrOut, "error:", e)
	}
	if code := p.ExitCode(); code != plan.ExitNoChange {
		return exitCode(code)
	}
	return nil
}

// planCheckout reads the policies and holds o names and computes the plan;
// warnings go to stderr. What it reads from the cluster for later (the
// gates, for --notes) is kept in o.
func planCheckout(ctx context.Context, o *planOptions, stderr io.Writer) (*plan.Plan, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	var (
		policies map[update.PolicyKey]guard.Policy
		assets   map[update.AssetKey]string
		gated    []plan.Gated
		err      error
	)
	if o.refs != "" {
		policies, err = plan.ReadRefsFile(o.refs)
	} else {
		policies, assets, gated, err = o.readCluster(ctx, stderr)
	}
	if err != nil {
		return nil, err
	}
	holds, _, err := plan.ReadHolds(o.checkout, o.branch, o.pushBranch)
	if err != nil {
		return nil, err
	}
	return plan.Compute(ctx, plan.Input{
		Root:             o.checkout,
		Path:             o.path,
		DefaultNamespace: o.namespace,
		Input: guard.Input{
			Policies:       policies,
			Holds:          holds,
			Releases:       guard.ParseReleases(o.releaseHolds),
			AllowDowngrade: o.allowDowngrade,
		},
		Assets: assets,
		Gated:  gated,
	})
}

// validate reports a missing flag or flags that exclude each other.
func (o planOptions) validate() error {
	switch {
	case o.checkout == "":
		return errors.New("--checkout is required")
	case o.kubeconfig == "" && o.refs == "":
		return errors.New("one of --kubeconfig and --refs is required")
	case o.kubeconfig != "" && o.refs != "":
		return errors.New("--kubeconfig and --refs exclude each other")
	case o.automation != "" && (o.kubeconfig == "" || o.namespace == ""):
		return errors.New("--automation needs --kubeconfig and --namespace")
	}
	return nil
}

// readCluster reads the ImagePolicies and ReleaseSources of the cluster
// o.kubeconfig reaches, with the sources' pinned assets, naming those not
// ready on stderr, and what the ReleaseGates hold back from the policies;
// with --automation, it takes the
// automation's push branch, released holds and spec.allowDowngrade into o
// where no flag set them.
func (o *planOptions) readCluster(ctx context.Context, stderr io.Writer) (map[update.PolicyKey]guard.Policy, map[update.AssetKey]string, []plan.Gated, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: o.kubeContext},
	).ClientConfig()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading kubeconfig %s: %w", o.kubeconfig, err)
	}
	scheme, err := controllers.NewScheme()
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	if o.automation != "" {
		pushBranch, releases, allowDowngrade, err := automationRules(ctx, c, client.ObjectKey{Namespace: o.namespace, Name: o.automation})
		if err != nil {
			return nil, nil, nil, err
		}
		if !o.set["push-branch"] {
			o.pushBranch = pushBranch
		}
		if !o.set["release-holds"] {
			o.releaseHolds = releases
		}
		if !o.set["allow-downgrade"] {
			o.allowDowngrade = allowDowngrade
		}
	}
	policies, notReady, err := plan.ListPolicies(ctx, c, o.namespace)
	if err != nil {
		return nil, nil, nil, err
	}
	sources, assets, sourcesNotReady, err := plan.ListSources(ctx, c, o.namespace)
	if err != nil {
		return nil, nil, nil, err
	}
	maps.Copy(policies, sources)
	notReady = append(notReady, sourcesNotReady...)
	if len(notReady) > 0 {
		_, _ = fmt.Fprintln(stderr, "skipped policies not ready:", strings.Join(notReady, ", "))
	}
	gated, err := plan.ListGated(ctx, c, o.namespace)
	if err != nil {
		return nil, nil, nil, err
	}
	if o.notes {
		var list uprevv1.ReleaseGateList
		if err := c.List(ctx, &list, client.InNamespace(o.namespace)); err != nil {
			return nil, nil, nil, fmt.Errorf("listing release gates: %w", err)
		}
		o.gates = list.Items
		var sourceList uprevv1.ReleaseSourceList
		if err := c.List(ctx, &sourceList, client.InNamespace(o.namespace)); err != nil {
			return nil, nil, nil, fmt.Errorf("listing release sources: %w", err)
		}
		o.sources = sourceList.Items
	}
	return policies, assets, gated, nil
}

// automationRules reads the rules a plan takes from the automation at key:
// an UpdateAutomation, else Flux's ImageUpdateAutomation of that name. A
// Flux automation's push branch is spec.git.push.branch, else its checkout
// branch ("" when it names none: the checkout's current branch is used);
// it has no allowDowngrade.
func automationRules(ctx context.Context, c client.Reader, key client.ObjectKey) (pushBranch, releases string, allowDowngrade bool, err error) {
	auto := &uprevv1.UpdateAutomation{}
	err = c.Get(ctx, key, auto)
	if err == nil {
		return auto.PushBranch(), auto.Annotations[uprevv1.HoldReleaseAnnotation], auto.Spec.AllowDowngrade, nil
	}
	if !apierrors.IsNotFound(err) {
		return "", "", false, fmt.Errorf("reading UpdateAutomation %s: %w", key, err)
	}
	flux := &iacv1.ImageUpdateAutomation{}
	if err := c.Get(ctx, key, flux); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", false, fmt.Errorf("reading UpdateAutomation %s: no UpdateAutomation or ImageUpdateAutomation of that name", key)
		}
		return "", "", false, fmt.Errorf("reading ImageUpdateAutomation %s: %w", key, err)
	}
	if git := flux.Spec.GitSpec; git != nil {
		switch {
		case git.Push != nil && git.Push.Branch != "":
			pushBranch = git.Push.Branch
		case git.Checkout != nil:
			pushBranch = git.Checkout.Reference.Branch
		}
	}
	return pushBranch, flux.Annotations[uprevv1.HoldReleaseAnnotation], false, nil
}
