package cli

import (
	"context"
	"fmt"
	"strings"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/update"
)

// rejectLong is the help of `uprev reject`.
const rejectLong = `Rejects a version of an ImagePolicy or ReleaseSource without a revert: records
in Git that the automation must never propose it, with the reason, so that the
rejection is reviewed like any change, survives restarts and travels with the
repository.

The rejection is a commit with no change of files on the branch the checkout
(--checkout, default the current directory) is on, whose trailers say what is
rejected and why. It is made with your own git ('git commit --allow-empty
--only'), so your Git configuration applies as to any commit of yours: the
user.name and user.email it names, signing (commit.gpgSign, user.signingKey,
gpg.format openpgp, ssh or x509; --sign signs whatever commit.gpgSign says),
and the repository's hooks. What git refuses (no identity, no key to sign
with, a failing hook) fails the command with git's words. Nothing is pushed: push the commit to the branch the automation reads (or its push
branch), or open a pull request with it. From then on the automation holds
the version, as it holds a reverted one: 'uprev get holds' lists it with its
reason, and 'uprev release-hold' lifts it (as does a revert of the commit).

POLICY is an ImagePolicy or, when there is none of the name, a ReleaseSource of
the automation's namespace, or <namespace>/<name> for an ImagePolicy of another.
The reason is one line (its white space is folded), at most 512 bytes.`

// rejectOptions are the flags of `uprev reject`.
type rejectOptions struct {
	cluster  *clusterFlags
	reason   string
	checkout string
	sign     bool
}

// newRejectCommand returns `uprev reject`.
func newRejectCommand(opts Options) *cobra.Command {
	o := &rejectOptions{}
	cmd := &cobra.Command{
		Use:   "reject AUTOMATION POLICY VERSION --reason TEXT",
		Short: "Record in Git that an automation must never propose a version, and why",
		Long:  rejectLong,
		Example: `  uprev reject fleet agent 1.5.0 --reason "crashes on arm64, see #412" -n uprev-system
  uprev reject fleet kubernetes v1.31.0 --reason "waiting for the CNI" --checkout ~/src/fleet -n uprev-system`,
		GroupID: groupOperate,
		Args:    cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), opts, args[0], args[1], args[2])
		},
	}
	cmd.Flags().StringVar(&o.reason, "reason", "", "Why the version is rejected (required): shown with the hold.")
	cmd.Flags().StringVar(&o.checkout, "checkout", ".", "The checkout of the automation's repository to record the rejection in.")
	cmd.Flags().BoolVarP(&o.sign, "sign", "S", false, "Sign the commit (git commit -S) even when the Git configuration does not ask for it (commit.gpgSign).")
	o.cluster = newClusterFlags(cmd.Flags())
	completeNamespaces(cmd, o.cluster)
	return cmd
}

// run records the rejection of policy's version for automation name.
func (o *rejectOptions) run(ctx context.Context, opts Options, name, policy, version string) error {
	c, ns, held, err := o.cluster.heldAutomation(ctx, opts.ErrOut, name)
	if err != nil {
		return err
	}
	key, err := rejectedPolicy(ctx, c, ns, policy)
	if err != nil {
		return err
	}
	message, err := guard.RejectionMessage(guard.Rejection{Policy: key, Version: version, Reason: o.reason})
	if err != nil {
		return err
	}
	if err := o.keepHeld(ctx, c, held, guard.Hold{Policy: key, Version: version}); err != nil {
		return err
	}
	sha, branch, err := gitrepo.CommitRecord(o.checkout, message, gitrepo.RecordOptions{Sign: o.sign, Now: opts.Clock.Now()})
	if err != nil {
		return fmt.Errorf("recording the rejection in %s: %w", o.checkout, err)
	}
	_, err = fmt.Fprintf(opts.Out, "%s/%s: rejected %s %s in commit %s on branch %s.\nPush it to the branch the automation reads (or open a pull request with it); `uprev release-hold %s %s %s -n %s` lifts it.\n",
		held.Resource, name, key, version, shortSHA(sha), branch, name, policy, version, ns)
	return err
}

// rejectedPolicy returns policy as the hold names it: `<namespace>/<name>`
// of an ImagePolicy, or `ReleaseSource/<namespace>/<name>` of a
// ReleaseSource of the namespace when there is no ImagePolicy of the name.
func rejectedPolicy(ctx context.Context, c client.Reader, ns, policy string) (string, error) {
	qualified := qualifiedPolicy(ns, policy)
	polNS, polName, _ := strings.Cut(qualified, "/")
	err := c.Get(ctx, client.ObjectKey{Namespace: polNS, Name: polName}, &imagev1.ImagePolicy{})
	switch {
	case err == nil:
		return qualified, nil
	case !apierrors.IsNotFound(err):
		return "", lookupError(err, imagev1.ImagePolicyKind, polNS, polName)
	case strings.Contains(policy, "/"):
		return "", fmt.Errorf("ImagePolicy %q not found in namespace %q", polName, polNS)
	}
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: policy}, &uprevv1.ReleaseSource{})
	switch {
	case err == nil:
		return update.PolicyKey{Namespace: ns, Name: policy, Kind: update.SourceKind}.String(), nil
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("no ImagePolicy nor ReleaseSource %q in namespace %q", policy, ns)
	}
	return "", lookupError(err, uprevv1.ReleaseSourceKind, ns, policy)
}

// keepHeld takes the entry that releases hold out of the automation's
// release annotation, so that a version released before and rejected
// again is held. An annotation of `*` releases every hold: it is an
// error, as the rejection would be released at once.
func (o *rejectOptions) keepHeld(ctx context.Context, c client.Client, held heldAutomation, hold guard.Hold) error {
	obj := held.Object
	annotations := obj.GetAnnotations()
	current := annotations[uprevv1.HoldReleaseAnnotation]
	rest := guard.RemoveReleases(current, hold)
	switch {
	case guard.ParseReleases(rest).Released(hold):
		return fmt.Errorf("%s %s/%s releases every hold (annotation %s is %q): remove it first, or the rejection would be released at once",
			held.Kind, obj.GetNamespace(), obj.GetName(), uprevv1.HoldReleaseAnnotation, current)
	case !guard.ParseReleases(current).Released(hold):
		return nil
	}
	before := obj.DeepCopyObject().(client.Object)
	annotations[uprevv1.HoldReleaseAnnotation] = rest
	obj.SetAnnotations(annotations)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patching %s %s/%s: %w", held.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
