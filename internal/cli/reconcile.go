package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// objectKind is a kind that `uprev reconcile`, `suspend` and `resume` act
// on: one subcommand of each.
type objectKind struct {
	// name is the subcommand, singular: "sync".
	name    string
	aliases []string
	// kind is the Kubernetes kind, for messages.
	kind string
	// resource names its objects in output, as kubectl does:
	// "sync.uprev.dev".
	resource  string
	newObject func() client.Object
	// suspend points at the object's spec.suspend; nil for a kind that
	// cannot be suspended (ReleaseGate), which only reconcile acts on.
	suspend func(client.Object) *bool
	// status returns the reconcile request the controller handled last
	// and the object's conditions.
	status func(client.Object) (lastHandled string, conditions []metav1.Condition)
}

// objectKinds are the kinds that reconcile, suspend and resume act on.
func objectKinds() []objectKind {
	return []objectKind{
		{
			name:      "automation",
			aliases:   []string{"automations", "updateautomation", "updateautomations", "ua"},
			kind:      uprevv1.UpdateAutomationKind,
			resource:  "updateautomation." + uprevv1.GroupVersion.Group,
			newObject: func() client.Object { return &uprevv1.UpdateAutomation{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*uprevv1.UpdateAutomation).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				a := obj.(*uprevv1.UpdateAutomation)
				return a.Status.LastHandledReconcileAt, a.Status.Conditions
			},
		},
		{
			name:      "sync",
			aliases:   []string{"syncs"},
			kind:      uprevv1.SyncKind,
			resource:  "sync." + uprevv1.GroupVersion.Group,
			newObject: func() client.Object { return &uprevv1.Sync{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*uprevv1.Sync).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				s := obj.(*uprevv1.Sync)
				return s.Status.LastHandledReconcileAt, s.Status.Conditions
			},
		},
		{
			name:      "repository",
			aliases:   []string{"repositories", "imagerepository", "imagerepositories"},
			kind:      imagev1.ImageRepositoryKind,
			resource:  "imagerepository." + imagev1.GroupVersion.Group,
			newObject: func() client.Object { return &imagev1.ImageRepository{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*imagev1.ImageRepository).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				r := obj.(*imagev1.ImageRepository)
				return r.Status.LastHandledReconcileAt, r.Status.Conditions
			},
		},
		{
			name:      "policy",
			aliases:   []string{"policies", "imagepolicy", "imagepolicies"},
			kind:      imagev1.ImagePolicyKind,
			resource:  "imagepolicy." + imagev1.GroupVersion.Group,
			newObject: func() client.Object { return &imagev1.ImagePolicy{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*imagev1.ImagePolicy).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				p := obj.(*imagev1.ImagePolicy)
				return p.Status.LastHandledReconcileAt, p.Status.Conditions
			},
		},
		{
			name:      "source",
			aliases:   []string{"sources", "releasesource", "releasesources"},
			kind:      uprevv1.ReleaseSourceKind,
			resource:  "releasesource." + uprevv1.GroupVersion.Group,
			newObject: func() client.Object { return &uprevv1.ReleaseSource{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*uprevv1.ReleaseSource).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				s := obj.(*uprevv1.ReleaseSource)
				return s.Status.LastHandledReconcileAt, s.Status.Conditions
			},
		},
		{
			name:      "gate",
			aliases:   []string{"gates", "releasegate", "releasegates"},
			kind:      uprevv1.ReleaseGateKind,
			resource:  "releasegate." + uprevv1.GroupVersion.Group,
			newObject: func() client.Object { return &uprevv1.ReleaseGate{} },
			status: func(obj client.Object) (string, []metav1.Condition) {
				g := obj.(*uprevv1.ReleaseGate)
				return g.Status.LastHandledReconcileAt, g.Status.Conditions
			},
		},
		{
			name:      "imageupdateautomation",
			aliases:   []string{"imageupdateautomations", "iua"},
			kind:      iacv1.ImageUpdateAutomationKind,
			resource:  "imageupdateautomation." + iacv1.GroupVersion.Group,
			newObject: func() client.Object { return &iacv1.ImageUpdateAutomation{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*iacv1.ImageUpdateAutomation).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				a := obj.(*iacv1.ImageUpdateAutomation)
				return a.Status.LastHandledReconcileAt, a.Status.Conditions
			},
		},
	}
}

// plural is the plural of a kind's name, as the help says it:
// ImagePolicies, Syncs.
func plural(kind string) string {
	if stem, ok := strings.CutSuffix(kind, "y"); ok {
		return stem + "ies"
	}
	return kind + "s"
}

// kindNames lists the names of kinds for messages: "automation, sync,
// repository, policy or imageupdateautomation".
func kindNames(kinds []objectKind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// verbKinds is how the help of reconcile names the kinds it acts on;
// suspendKinds those suspend and resume act on, all but ReleaseGates.
const (
	verbKinds    = "UpdateAutomations, Syncs, ImageRepositories, ImagePolicies, ReleaseSources, ReleaseGates or Flux ImageUpdateAutomations"
	suspendKinds = "UpdateAutomations, Syncs, ImageRepositories, ImagePolicies, ReleaseSources or Flux ImageUpdateAutomations"
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

// waitHandled waits until the controller handled the reconcile request
// token of the object at key and, for a Sync rolled out in waves, until
// its last wave is done; then it prints the Ready message, or fails when
// the object is not Ready. When --timeout passes first, the error says
// where the object stands.
func (o *objectVerbOptions) waitHandled(ctx context.Context, out io.Writer, c client.Client, k objectKind, key client.ObjectKey, token string) error {
	obj := k.newObject()
	handled := false
	// A read that fails is tried again at the next poll (an API server
	// that is busy), and named if --timeout passes; only a deleted object
	// ends the wait at once. Reads take the command's context, not the
	// poll's: the client's rate limiter refuses to wait past the poll's
	// deadline, which would fail the last read of a wait that is about to
	// say where the object stands.
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, o.timeout, true, func(context.Context) (bool, error) {
		if err := c.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return false, lookupError(err, k.kind, key.Namespace, key.Name)
			}
			lastErr = err
			return false, nil
		}
		lastErr = nil
		last, conditions := k.status(obj)
		handled = last == token
		return handled && !rollingOut(conditions), nil
	})
	_, conditions := k.status(obj)
	ready, message := readyCells(conditions)
	if err != nil {
		if ctx.Err() == nil && wait.Interrupted(err) {
			msg := fmt.Sprintf("%s/%s: %s after %s", k.resource, key.Name, standing(handled, conditions), o.timeout)
			if lastErr != nil {
				msg += fmt.Sprintf(" (the last read failed: %v)", lastErr)
			}
			return errors.New(msg)
		}
		return fmt.Errorf("waiting for %s/%s to be reconciled: %w", k.resource, key.Name, err)
	}
	if ready != string(metav1.ConditionTrue) {
		return fmt.Errorf("%s/%s is not ready: %s", k.resource, key.Name, message)
	}
	_, err = fmt.Fprintf(out, "%s/%s reconciled: %s\n", k.resource, key.Name, message)
	return err
}

// rollingOut tells whether conditions say a rollout is under way: a
// Sync whose later waves wait for earlier ones.
func rollingOut(conditions []metav1.Condition) bool {
	c := findCondition(conditions, meta.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == uprevv1.RolloutInProgressReason
}

// standing says where an object that --wait gave up on stands: the
// request not handled yet (and what the controller says it waits for),
// or the rollout under way.
func standing(handled bool, conditions []metav1.Condition) string {
	if !handled {
		msg := "the controller has not handled the request"
		if c := findCondition(conditions, meta.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue {
			msg += " (" + c.Reason + ": " + c.Message + ")"
		}
		return msg
	}
	_, message := readyCells(conditions)
	return "still rolling out: " + message
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
