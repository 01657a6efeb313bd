package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// objectVerb is what one of reconcile, suspend and resume does to an
// object.
type objectVerb struct {
	use, short, long, example string
	// kindShort is the help of one kind's subcommand; %s is the kind's
	// plural.
	kindShort string
	// canWait says the verb requests a reconcile, which --wait waits for.
	canWait bool
	// suspends says the verb sets or clears spec.suspend, so that it acts
	// only on kinds that have one.
	suspends bool
	// change changes obj (read from the cluster) at time now, and returns
	// what to print after its name, or an error when it must not be
	// changed; changed false means there is nothing to write.
	change func(k objectKind, obj client.Object, now time.Time) (done string, changed bool, err error)
}

// objectVerbOptions are the flags of reconcile, suspend and resume.
type objectVerbOptions struct {
	cluster *clusterFlags
	wait    bool
	timeout time.Duration
}

// newObjectVerbCommand returns the command of verb, with a subcommand per
// kind.
func newObjectVerbCommand(opts Options, verb objectVerb) *cobra.Command {
	o := &objectVerbOptions{}
	var kinds []objectKind
	for _, k := range objectKinds() {
		if !verb.suspends || k.suspend != nil {
			kinds = append(kinds, k)
		}
	}
	cmd := &cobra.Command{
		Use:     verb.use + " KIND NAME...",
		Short:   verb.short,
		Long:    verb.long,
		Example: verb.example,
		GroupID: groupOperate,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("a kind is required: %s", kindNames(kinds))
			}
			return fmt.Errorf("unknown kind %q: want %s", args[0], kindNames(kinds))
		},
	}
	o.cluster = newClusterFlags(cmd.PersistentFlags())
	completeNamespaces(cmd, o.cluster)
	if verb.canWait {
		cmd.PersistentFlags().BoolVar(&o.wait, "wait", false, "Wait until the controller handled the request and a Sync's rollout went through all its waves; fail when the object is not Ready then.")
		cmd.PersistentFlags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "How long --wait waits.")
	}
	for _, k := range kinds {
		cmd.AddCommand(&cobra.Command{
			Use:     k.name + " NAME...",
			Aliases: k.aliases,
			Short:   fmt.Sprintf(verb.kindShort, plural(k.kind)),
			Args:    cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, names []string) error {
				return o.run(cmd.Context(), opts, verb, k, names)
			},
			ValidArgsFunction: completeNames(o.cluster, false, func() runtime.Object { return k.newObject() }),
		})
	}
	return cmd
}

// run applies verb to the objects of kind k named names, in order,
// stopping at the first error.
func (o *objectVerbOptions) run(ctx context.Context, opts Options, verb objectVerb, k objectKind, names []string) error {
	ns, err := o.cluster.namespace()
	if err != nil {
		return err
	}
	c, err := o.cluster.client(opts.ErrOut)
	if err != nil {
		return err
	}
	for _, name := range names {
		key := client.ObjectKey{Namespace: ns, Name: name}
		obj := k.newObject()
		if err := c.Get(ctx, key, obj); err != nil {
			return lookupError(err, k.kind, ns, name)
		}
		before := obj.DeepCopyObject().(client.Object)
		done, changed, err := verb.change(k, obj, opts.Clock.Now())
		if err != nil {
			return fmt.Errorf("%s/%s %w", k.resource, name, err)
		}
		if changed {
			if err := c.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
				return fmt.Errorf("patching %s %s/%s: %w", k.kind, ns, name, err)
			}
		}
		if _, err := fmt.Fprintf(opts.Out, "%s/%s %s\n", k.resource, name, done); err != nil {
			return err
		}
		if verb.canWait && o.wait && changed {
			token, _ := meta.ReconcileAnnotationValue(obj.GetAnnotations())
			if err := o.waitHandled(ctx, opts.Out, c, k, key, token); err != nil {
				return err
			}
		}
	}
	return nil
}

// requestReconcile sets the reconcile request annotation that uprev's
// controllers (as Flux's) honour, to the time now.
func requestReconcile(obj client.Object, now time.Time) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[meta.ReconcileRequestAnnotation] = now.Format(time.RFC3339Nano)
	obj.SetAnnotations(annotations)
}

// newReconcileCommand returns `uprev reconcile`.
func newReconcileCommand(opts Options) *cobra.Command {
	return newObjectVerbCommand(opts, objectVerb{
		use:       "reconcile",
		short:     "Reconcile " + verbKinds + " now",
		kindShort: "Reconcile %s now",
		long: `Asks the controller to reconcile the named ` + verbKinds + `
now, without waiting for their interval: sets the annotation
` + meta.ReconcileRequestAnnotation + `, as 'flux reconcile' does. With --wait,
waits until the controller handled the request (for a Sync rolled out in
waves, until its last wave is done) and reports the outcome; it fails when
the object is not Ready then, or says where it stands when --timeout passes.`,
		example: `  uprev reconcile automation fleet -n uprev-system
  uprev reconcile sync prod -n uprev-system --wait`,
		canWait: true,
		change: func(k objectKind, obj client.Object, now time.Time) (string, bool, error) {
			if k.suspend != nil && *k.suspend(obj) {
				return "", false, fmt.Errorf("is suspended: resume it with 'uprev resume %s %s'", k.name, obj.GetName())
			}
			requestReconcile(obj, now)
			return "reconcile requested", true, nil
		},
	})
}

// newSuspendCommand returns `uprev suspend`.
func newSuspendCommand(opts Options) *cobra.Command {
	return newObjectVerbCommand(opts, objectVerb{
		use:       "suspend",
		short:     "Suspend " + suspendKinds,
		kindShort: "Suspend %s",
		suspends:  true,
		long: `Suspends the named ` + suspendKinds + `: sets spec.suspend, so that
their controller starts no further runs (a run under way finishes). A
suspended Sync that is deleted leaves what it applied in place.`,
		example: `  uprev suspend automation fleet -n uprev-system`,
		change: func(k objectKind, obj client.Object, _ time.Time) (string, bool, error) {
			suspend := k.suspend(obj)
			if *suspend {
				return "already suspended", false, nil
			}
			*suspend = true
			return "suspended", true, nil
		},
	})
}

// newResumeCommand returns `uprev resume`.
func newResumeCommand(opts Options) *cobra.Command {
	return newObjectVerbCommand(opts, objectVerb{
		use:       "resume",
		short:     "Resume suspended " + suspendKinds,
		kindShort: "Resume suspended %s",
		suspends:  true,
		long: `Resumes the named ` + suspendKinds + `: clears spec.suspend and asks
for a reconcile now (the annotation ` + meta.ReconcileRequestAnnotation + `).
With --wait, waits until the controller handled it and reports the outcome.`,
		example: `  uprev resume automation fleet -n uprev-system --wait`,
		canWait: true,
		change: func(k objectKind, obj client.Object, now time.Time) (string, bool, error) {
			suspend := k.suspend(obj)
			if !*suspend {
				return "not suspended", false, nil
			}
			*suspend = false
			requestReconcile(obj, now)
			return "resumed", true, nil
		},
	})
}
