package cli

import (
	"context"
	"fmt"
	"strings"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
already; a later revert of another version holds again.

When AUTOMATION is no UpdateAutomation but Flux's ImageUpdateAutomation, whose
status has no field for holds (its Ready message counts them, "1 held"; 'uprev
plan --automation' lists them from a checkout), POLICY and VERSION are
required: the hold of that version is released.`

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
	return cmd
}

// run releases the holds of automation name on policy (all when empty),
// of version only when it is set.
func (o *releaseHoldOptions) run(ctx context.Context, opts Options, name, policy, version string) error {
	ns, err := o.cluster.namespace()
	if err != nil {
		return err
	}
	c, err := o.cluster.client(opts.ErrOut)
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: ns, Name: name}
	var (
		obj      client.Object
		resource string
		holds    []guard.Hold
	)
	auto := &uprevv1.UpdateAutomation{}
	switch err := c.Get(ctx, key, auto); {
	case err == nil:
		obj, resource = auto, "updateautomation."+uprevv1.GroupVersion.Group
		if holds, err = holdsToRelease(auto, policy, version); err != nil {
			return err
		}
	case apierrors.IsNotFound(err):
		flux := &iacv1.ImageUpdateAutomation{}
		if err := c.Get(ctx, key, flux); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("UpdateAutomation %q not found in namespace %q (nor an ImageUpdateAutomation)", name, ns)
			}
			return lookupError(err, iacv1.ImageUpdateAutomationKind, ns, name)
		}
		if policy == "" || version == "" {
			return fmt.Errorf("ImageUpdateAutomation %s/%s reports no holds in its status: name the POLICY and VERSION to release", ns, name)
		}
		obj, resource = flux, "imageupdateautomation."+iacv1.GroupVersion.Group
		holds = []guard.Hold{{Policy: qualifiedPolicy(ns, policy), Version: version}}
	default:
		return lookupError(err, uprevv1.UpdateAutomationKind, ns, name)
	}
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
			return fmt.Errorf("patching %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, ns, name, err)
		}
	}
	for _, h := range holds {
		fmt.Fprintf(opts.Out, "%s/%s released %s %s\n", resource, name, h.Policy, h.Version)
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

// holdsToRelease returns the holds of auto's status on policy (a name in
// auto's namespace or <namespace>/<name>; all when empty) of version (any
// when empty), failing when there are none.
func holdsToRelease(auto *uprevv1.UpdateAutomation, policy, version string) ([]guard.Hold, error) {
	if policy != "" {
		policy = qualifiedPolicy(auto.Namespace, policy)
	}
	var holds []guard.Hold
	for _, h := range auto.Status.Holds {
		if (policy == "" || h.Policy == policy) && (version == "" || h.Version == version) {
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
	if version != "" {
		policy += " " + version
	}
	return nil, fmt.Errorf("UpdateAutomation %s/%s holds nothing of policy %s (it holds %s)", auto.Namespace, auto.Name, policy, strings.Join(held, ", "))
}
