package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
)

// releaseHoldLong is the help of `uprev release-hold`.
var releaseHoldLong = `Releases holds of an UpdateAutomation or of a Flux ImageUpdateAutomation: the
versions it does not write because someone reverted them (see 'uprev get
holds'). The automation writes a released version again at its next run,
which the change starts, if its policy still selects it.

With POLICY (a name in the automation's namespace, or <namespace>/<name>),
releases that policy's hold; without, every hold the automation reports now.
Holds are released by adding '<namespace>/<policy> <version>' entries to the
annotation ` + uprevv1.HoldReleaseAnnotation + `, which keeps the entries there
already; a later revert of another version holds again.

An UpdateAutomation reports its holds in status.holds; an ImageUpdateAutomation,
whose status has no field for them, in the annotation
` + uprevv1.HoldsAnnotation + `, which the manager writes after each run and which
lists at most ` + maxPublishedHoldsText + ` holds. For an ImageUpdateAutomation, POLICY
and VERSION together release that hold also when the annotation does not
list it (yet).`

// maxPublishedHoldsText is uprevv1.MaxPublishedHolds as the help says it.
var maxPublishedHoldsText = strconv.Itoa(uprevv1.MaxPublishedHolds)

// releaseHoldOptions are the flags of `uprev release-hold`.
type releaseHoldOptions struct {
	cluster *clusterFlags
}

// newReleaseHoldCommand returns `uprev release-hold`.
func newReleaseHoldCommand(opts Options) *cobra.Command {
	o := &releaseHoldOptions{}
	cmd := &cobra.Command{
		Use:   "release-hold AUTOMATION [POLICY [VERSION]]",
		Short: "Release the holds an UpdateAutomation (or Flux ImageUpdateAutomation) keeps on reverted versions",
		Long:  releaseHoldLong,
		Example: `  uprev release-hold fleet agent -n uprev-system
  uprev release-hold fleet -n uprev-system
  uprev release-hold flux-system podinfo 5.1.0 -n flux-system`,
		GroupID: groupOperate,
		Args:    cobra.RangeArgs(1, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			args = append(args, "", "")
			return o.run(cmd.Context(), opts, args[0], args[1], args[2])
		},
	}
	o.cluster = newClusterFlags(cmd.Flags())
	completeNamespaces(cmd, o.cluster)
	cmd.ValidArgsFunction = completeNames(o.cluster, true,
		func() runtime.Object { return &uprevv1.UpdateAutomationList{} }, func() runtime.Object { return &iacv1.ImageUpdateAutomationList{} })
	return cmd
}

// run releases the holds of automation name on policy (all when empty),
// of version only when it is set.
func (o *releaseHoldOptions) run(ctx context.Context, opts Options, name, policy, version string) error {
	c, ns, held, err := o.cluster.heldAutomation(ctx, opts.ErrOut, name)
	if err != nil {
		return err
	}
	holds, err := holdsToRelease(held, policy, version)
	if err != nil {
		return err
	}
	obj := held.Object
	before := obj.DeepCopyObject().(client.Object)
	annotations := obj.GetAnnotations()
	annotation := guard.AddReleases(annotations[uprevv1.HoldReleaseAnnotation], holds...)
	if annotation != annotations[uprevv1.HoldReleaseAnnotation] {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[uprevv1.HoldReleaseAnnotation] = annotation
		obj.SetAnnotations(annotations)
		// The optimistic lock keeps an entry someone else adds at the same
		// time from being lost.
		if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("patching %s %s/%s: %w", held.Kind, ns, name, err)
		}
	}
	for _, h := range holds {
		if _, err := fmt.Fprintf(opts.Out, "%s/%s released %s %s\n", held.Resource, name, h.Policy, h.Version); err != nil {
			return err
		}
	}
	return nil
}

// qualifiedPolicy returns policy as <namespace>/<name>, in namespace when
// it names none.
func qualifiedPolicy(namespace, policy string) string {
	if strings.Contains(policy, "/") {
		return policy
	}
	return namespace + "/" + policy
}

// holdsToRelease returns the holds auto reports on policy (a name in its
// namespace or <namespace>/<name>; all when empty) of version (any when
// empty), failing when there are none; but an ImageUpdateAutomation's
// hold named by policy and version is released also when its annotation
// does not list it, which lists at most uprevv1.MaxPublishedHolds and is
// written after a run.
func holdsToRelease(auto heldAutomation, policy, version string) ([]guard.Hold, error) {
	ns, name := auto.Object.GetNamespace(), auto.Object.GetName()
	if policy != "" {
		policy = qualifiedPolicy(ns, policy)
	}
	var holds []guard.Hold
	for _, h := range auto.Holds {
		if (policy == "" || h.Policy == policy) && (version == "" || h.Version == version) {
			holds = append(holds, guardHold(h))
		}
	}
	switch {
	case len(holds) > 0:
		return holds, nil
	case auto.Kind == iacv1.ImageUpdateAutomationKind && policy != "" && version != "":
		return []guard.Hold{{Policy: policy, Version: version}}, nil
	}
	var held []string
	for _, h := range auto.Holds {
		held = append(held, h.Policy+" "+h.Version)
	}
	if policy == "" || len(held) == 0 {
		return nil, fmt.Errorf("%s %s/%s holds nothing", auto.Kind, ns, name)
	}
	if version != "" {
		policy += " " + version
	}
	return nil, fmt.Errorf("%s %s/%s holds nothing of policy %s (it holds %s)", auto.Kind, ns, name, policy, strings.Join(held, ", "))
}
