package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	flag "github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/plan"
	"github.com/uprev-dev/uprev/internal/update"
)

// planUsage heads the help of `uprev plan`.
const planUsage = `Usage: uprev plan --checkout DIR [--path ./clusters] (--kubeconfig FILE [--namespace NS] | --refs FILE) [--branch main] [--allow-downgrade]

Prints what the next automation run would change in the checkout DIR, one
line per change, then the held versions and the refused changes. Writes
nothing. Exit code: 0 when nothing would change, 2 when something would,
1 on error.

`

// planOptions are the flags of `uprev plan`.
type planOptions struct {
	checkout       string
	path           string
	kubeconfig     string
	kubeContext    string
	namespace      string
	refs           string
	branch         string
	allowDowngrade bool
}

// runPlan runs `uprev plan` with args (after the word plan), prints the
// plan to stdout and problems to stderr, and returns the exit code.
func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o planOptions
	fs := flag.NewFlagSet("uprev plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, planUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.checkout, "checkout", "", "The checkout of the repository the automation writes to (required).")
	fs.StringVar(&o.path, "path", ".", "The directory under the checkout whose files the automation updates (its spec.update.path).")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Read the ImagePolicies from the cluster of this kubeconfig.")
	fs.StringVar(&o.kubeContext, "context", "", "The kubeconfig context to use; default: its current context.")
	fs.StringVar(&o.namespace, "namespace", "", "The namespace of the automation: ImagePolicies are read from it (default: all namespaces), and markers that name no namespace use it.")
	fs.StringVar(&o.refs, "refs", "", "Read the policies' latest references from this YAML or JSON file instead of a cluster (see docs/plan.md).")
	fs.StringVar(&o.branch, "branch", "", "The branch whose history holds reverts; default: the checkout's current branch.")
	fs.BoolVar(&o.allowDowngrade, "allow-downgrade", false, "Allow changes to lower versions, as spec.allowDowngrade does.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return plan.ExitNoChange
		}
		fmt.Fprintln(stderr, "uprev plan:", err)
		return plan.ExitError
	}
	p, err := planCheckout(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "uprev plan:", err)
		return plan.ExitError
	}
	if err := p.Write(stdout); err != nil {
		fmt.Fprintln(stderr, "uprev plan: writing the plan:", err)
		return plan.ExitError
	}
	for _, e := range p.Result.FileErrors {
		fmt.Fprintln(stderr, "error:", e)
	}
	return p.ExitCode()
}

// planCheckout reads the policies and holds o names and computes the plan;
// warnings go to stderr.
func planCheckout(ctx context.Context, o planOptions, stderr io.Writer) (*plan.Plan, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	var (
		policies map[update.PolicyKey]guard.Policy
		err      error
	)
	if o.refs != "" {
		policies, err = plan.ReadRefsFile(o.refs)
	} else {
		policies, err = clusterPolicies(ctx, o, stderr)
	}
	if err != nil {
		return nil, err
	}
	holds, _, err := plan.ReadHolds(o.checkout, o.branch, "")
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
			AllowDowngrade: o.allowDowngrade,
		},
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
	}
	return nil
}

// clusterPolicies reads the ImagePolicies of the cluster o.kubeconfig
// reaches; those not ready are named on stderr.
func clusterPolicies(ctx context.Context, o planOptions, stderr io.Writer) (map[update.PolicyKey]guard.Policy, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: o.kubeContext},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", o.kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	if err := imagev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	policies, notReady, err := plan.ListPolicies(ctx, c, o.namespace)
	if err != nil {
		return nil, err
	}
	if len(notReady) > 0 {
		fmt.Fprintln(stderr, "skipped policies not ready:", strings.Join(notReady, ", "))
	}
	return policies, nil
}
