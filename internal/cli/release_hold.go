package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
)

// releaseHoldLong is the help of `uprev release-hold`.
const releaseHoldLong = `Releases holds of an UpdateAutomation: the versions it does not write
because someone reverted them (see 'uprev get holds'). The automation writes
a released version again at its next run, which the change starts, if its
policy still selects it.

With POLICY (a name in the automation's namespace, or <namespace>/<name>),
releases that policy's hold; without, every hold the automation reports now.
Holds are released by adding '<namespace>/<policy> <version>' entries to the
annotation ` + uprevv1.HoldReleaseAnnotation + `, which keeps the entries there
already; a later revert of another version holds again.`

// releaseHoldOptions are the flags of `uprev release-hold`.
type releaseHoldOptions struct {
	cluster *clusterFlags
}

// newReleaseHoldCommand returns `uprev release-hold`.
func newReleaseHoldCommand(opts Options) *cobra.Command {
	o := &releaseHoldOptions{}
	cmd := &cobra.Command{
		Use:   "release-hold AUTOMATION [POLICY]",
		Short: "Release the holds an UpdateAutomation keeps on reverted versions",
		Long:  releaseHoldLong,
		Example: `  uprev release-hold fleet agent -n uprev-system
  uprev release-hold fleet -n uprev-system`,
		GroupID: groupOperate,
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			policy := ""
			if len(args) == 2 {
				policy = args[1]
			}
			return o.run(cmd.Context(), opts, args[0], policy)
		},
	}
	o.cluster = newClusterFlags(cmd.Flags())
	return cmd
}

// run releases the holds of automation name on policy (all when empty).
func (o *releaseHoldOptions) run(ctx context.Context, opts Options, name, policy string) error {
	ns, err := o.cluster.namespace()
	if err != nil {
		return err
	}
	c, err := o.cluster.client(opts.ErrOut)
	if err != nil {
		return err
	}
	auto := &uprevv1.UpdateAutomation{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, auto); err != nil {
		return lookupError(err, uprevv1.UpdateAutomationKind, ns, name)
	}
	holds, err := holdsToRelease(auto, policy)
	if err != nil {
		return err
	}
	before := auto.DeepCopy()
	annotation := guard.AddReleases(auto.Annotations[uprevv1.HoldReleaseAnnotation], holds...)
	if annotation != auto.Annotations[uprevv1.HoldReleaseAnnotation] {
		if auto.Annotations == nil {
			auto.Annotations = map[string]string{}
		}
		auto.Annotations[uprevv1.HoldReleaseAnnotation] = annotation
		// The optimistic lock keeps an entry someone else adds at the same
		// time from being lost.
		if err := c.Patch(ctx, auto, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("patching UpdateAutomation %s/%s: %w", ns, name, err)
		}
	}
	for _, h := range holds {
		fmt.Fprintf(opts.Out, "updateautomation.%s/%s released %s %s\n", uprevv1.GroupVersion.Group, name, h.Policy, h.Version)
	}
	return nil
}

// holdsToRelease returns the holds of auto's status on policy (a name in
// auto's namespace or <namespace>/<name>; all when empty), failing when
// there are none.
func holdsToRelease(auto *uprevv1.UpdateAutomation, policy string) ([]guard.Hold, error) {
	if policy != "" && !strings.Contains(policy, "/") {
		policy = auto.Namespace + "/" + policy
	}
	var holds []guard.Hold
	for _, h := range auto.Status.Holds {
		if policy == "" || h.Policy == policy {
			holds = append(holds, guardHold(h))
		}
	}
	if len(holds) > 0 {
		return holds, nil
	}
	if policy == "" {
		return nil, fmt.Errorf("UpdateAutomation %s/%s holds nothing", auto.Namespace, auto.Name)
	}
	var held []string
	for _, h := range auto.Status.Holds {
		held = append(held, h.Policy+" "+h.Version)
	}
	if len(held) == 0 {
		return nil, fmt.Errorf("UpdateAutomation %s/%s holds nothing", auto.Namespace, auto.Name)
	}
	return nil, fmt.Errorf("UpdateAutomation %s/%s holds nothing of policy %s (it holds %s)", auto.Namespace, auto.Name, policy, strings.Join(held, ", "))
}
