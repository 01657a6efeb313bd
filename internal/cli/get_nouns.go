package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/fleet"
	"github.com/uprev-dev/uprev/internal/guard"
)

// objectPtr is a pointer to a Kubernetes object type T.
type objectPtr[T any] interface {
	*T
	client.Object
}

// readObjects returns the objects of one kind that q asks for: those
// named, or all of q.Namespace (every namespace when empty). list is an
// empty list of the kind, items its Items.
func readObjects[T any, P objectPtr[T]](ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, list client.ObjectList, items *[]T, q Query) ([]P, error) {
	var objs []P
	if len(q.Names) == 0 {
		opts := []client.ListOption{client.InNamespace(q.Namespace)}
		if q.Selector != nil {
			opts = append(opts, client.MatchingLabelsSelector{Selector: q.Selector})
		}
		if err := c.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range *items {
			objs = append(objs, P(&(*items)[i]))
		}
	}
	for _, name := range q.Names {
		obj := P(new(T))
		if err := c.Get(ctx, client.ObjectKey{Namespace: q.Namespace, Name: name}, obj); err != nil {
			return nil, lookupError(err, gvk.Kind, q.Namespace, name)
		}
		objs = append(objs, obj)
	}
	for _, obj := range objs {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		obj.SetManagedFields(nil) // kubectl leaves them out too
	}
	return objs, nil
}

// lookupError says which object a failed Get was for, plainly when it does
// not exist.
func lookupError(err error, kind, namespace, name string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %q not found in namespace %q", kind, name, namespace)
	}
	return fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
}

// policiesNoun lists ImagePolicies: the version each selects.
func policiesNoun() Noun {
	return Noun{
		Name:    "policies",
		Watches: func() client.ObjectList { return &imagev1.ImagePolicyList{} },
		Aliases: []string{"policy", "imagepolicies", "imagepolicy"},
		Short:   "List ImagePolicies and the version each selects",
		Read: func(ctx context.Context, c client.Reader, q Query) (*Table, error) {
			var list imagev1.ImagePolicyList
			policies, err := readObjects[imagev1.ImagePolicy](ctx, c, imagev1.GroupVersion.WithKind(imagev1.ImagePolicyKind), &list, &list.Items, q)
			if err != nil {
				return nil, err
			}
			t := &Table{Columns: []Column{
				{Header: "NAME"}, {Header: "LATEST"}, {Header: "READY"}, {Header: "STATUS"}, {Header: "AGE"},
				{Header: "REPOSITORY", Wide: true}, {Header: "DIGEST", Wide: true},
			}}
			for _, p := range policies {
				var latest, digest string
				if ref := p.Status.LatestRef; ref != nil {
					latest, digest = ref.Name+":"+ref.Tag, ref.Digest
				}
				ready, message := readyCells(p.Status.Conditions)
				repo := p.Spec.ImageRepositoryRef.Name
				if ns := p.Spec.ImageRepositoryRef.Namespace; ns != "" && ns != p.Namespace {
					repo = ns + "/" + repo
				}
				t.Rows = append(t.Rows, Row{Namespace: p.Namespace, Object: p, Cells: []string{
					p.Name, latest, ready, message, age(p.CreationTimestamp, q.Now), repo, digest,
				}})
			}
			return t, nil
		},
	}
}

// readAutomations returns the UpdateAutomations q asks for.
func readAutomations(ctx context.Context, c client.Reader, q Query) ([]*uprevv1.UpdateAutomation, error) {
	var list uprevv1.UpdateAutomationList
	return readObjects[uprevv1.UpdateAutomation](ctx, c, uprevv1.GroupVersion.WithKind(uprevv1.UpdateAutomationKind), &list, &list.Items, q)
}

// automationsNoun lists UpdateAutomations: what each last pushed and
// holds.
func automationsNoun() Noun {
	return Noun{
		Name:    "automations",
		Watches: func() client.ObjectList { return &uprevv1.UpdateAutomationList{} },
		Aliases: []string{"automation", "updateautomations", "updateautomation", "ua"},
		Short:   "List UpdateAutomations, their last commit and holds",
		Read: func(ctx context.Context, c client.Reader, q Query) (*Table, error) {
			autos, err := readAutomations(ctx, c, q)
			if err != nil {
				return nil, err
			}
			t := &Table{Columns: []Column{
				{Header: "NAME"}, {Header: "READY"}, {Header: "SUSPENDED"}, {Header: "LAST COMMIT"}, {Header: "HOLDS"}, {Header: "STATUS"}, {Header: "AGE"},
				{Header: "URL", Wide: true}, {Header: "PUSH BRANCH", Wide: true}, {Header: "LAST PUSH", Wide: true},
			}}
			for _, a := range autos {
				ready, message := readyCells(a.Status.Conditions)
				t.Rows = append(t.Rows, Row{Namespace: a.Namespace, Object: a, Cells: []string{
					a.Name, ready, boolCell(a.Spec.Suspend), shortSHA(a.Status.LastPushCommit), strconv.Itoa(len(a.Status.Holds)),
					message, age(a.CreationTimestamp, q.Now),
					a.Spec.Git.URL, a.PushBranch(), ageOf(a.Status.LastPushTime, q.Now),
				}})
			}
			return t, nil
		},
	}
}

// fluxAutomationsNoun lists Flux's ImageUpdateAutomations that uprev
// serves: what each last pushed and holds (from the annotation the
// manager publishes, their status having no field for holds).
func fluxAutomationsNoun() Noun {
	return Noun{
		Name:    "imageupdateautomations",
		Watches: func() client.ObjectList { return &iacv1.ImageUpdateAutomationList{} },
		Aliases: []string{"imageupdateautomation", "iua"},
		Short:   "List Flux ImageUpdateAutomations, their last commit and holds",
		Read: func(ctx context.Context, c client.Reader, q Query) (*Table, error) {
			var list iacv1.ImageUpdateAutomationList
			autos, err := readObjects[iacv1.ImageUpdateAutomation](ctx, c, iacv1.GroupVersion.WithKind(iacv1.ImageUpdateAutomationKind), &list, &list.Items, q)
			if err != nil {
				return nil, err
			}
			t := &Table{Columns: []Column{
				{Header: "NAME"}, {Header: "READY"}, {Header: "SUSPENDED"}, {Header: "LAST COMMIT"}, {Header: "HOLDS"}, {Header: "STATUS"}, {Header: "AGE"},
				{Header: "SOURCE", Wide: true}, {Header: "PUSH BRANCH", Wide: true}, {Header: "LAST PUSH", Wide: true},
			}}
			for _, a := range autos {
				held, err := heldFluxAutomation(a)
				if err != nil {
					return nil, err
				}
				ready, message := readyCells(a.Status.Conditions)
				var pushBranch string
				if git := a.Spec.GitSpec; git != nil && git.Push != nil {
					pushBranch = git.Push.Branch
				}
				source := a.Spec.SourceRef.Kind + "/" + a.Spec.SourceRef.Name
				if a.Spec.SourceRef.Namespace != "" && a.Spec.SourceRef.Namespace != a.Namespace {
					source = a.Spec.SourceRef.Kind + "/" + a.Spec.SourceRef.Namespace + "/" + a.Spec.SourceRef.Name
				}
				t.Rows = append(t.Rows, Row{Namespace: a.Namespace, Object: a, Cells: []string{
					a.Name, ready, boolCell(a.Spec.Suspend), shortSHA(a.Status.LastPushCommit), strconv.Itoa(len(held.Holds) + held.Omitted),
					message, age(a.CreationTimestamp, q.Now), source, pushBranch, ageOf(a.Status.LastPushTime, q.Now),
				}})
			}
			return t, nil
		},
	}
}

// syncsNoun lists Syncs: the revision each applies and how many targets
// have it.
func syncsNoun() Noun {
	return Noun{
		Name:    "syncs",
		Watches: func() client.ObjectList { return &uprevv1.SyncList{} },
		Aliases: []string{"sync"},
		Short:   "List Syncs, their revision and how many targets applied it",
		Read: func(ctx context.Context, c client.Reader, q Query) (*Table, error) {
			var list uprevv1.SyncList
			syncs, err := readObjects[uprevv1.Sync](ctx, c, uprevv1.GroupVersion.WithKind(uprevv1.SyncKind), &list, &list.Items, q)
			if err != nil {
				return nil, err
			}
			t := &Table{Columns: []Column{
				{Header: "NAME"}, {Header: "READY"}, {Header: "SUSPENDED"}, {Header: "REVISION"}, {Header: "APPLIED"}, {Header: "STATUS"}, {Header: "AGE"},
				{Header: "URL", Wide: true}, {Header: "PATH", Wide: true}, {Header: "STEPS", Wide: true}, {Header: "TARGETS", Wide: true},
			}}
			for _, s := range syncs {
				ready, message := readyCells(s.Status.Conditions)
				targets := make([]string, len(s.Spec.Targets))
				for i, target := range s.Spec.Targets {
					targets[i] = target.Name
				}
				t.Rows = append(t.Rows, Row{Namespace: s.Namespace, Object: s, Cells: []string{
					s.Name, ready, boolCell(s.Spec.Suspend), shortRevision(s.Status.LastAttemptedRevision), appliedCell(s),
					message, age(s.CreationTimestamp, q.Now),
					s.Spec.Git.URL, s.Spec.Path, stepsCell(s), strings.Join(targets, ","),
				}})
			}
			return t, nil
		},
	}
}

// appliedCell says how many of a Sync's targets applied the revision it
// last fetched, from its step counts: "1/3"; "-" before it counted any.
func appliedCell(s *uprevv1.Sync) string {
	if len(s.Status.Steps) == 0 {
		return "-"
	}
	applied, targets := 0, 0
	for _, step := range s.Status.Steps {
		applied += step.OnRevision
		targets += step.Targets
	}
	return fmt.Sprintf("%d/%d", applied, targets)
}

// stepsCell says, for each rollout step of a Sync, how many of its targets
// applied the revision, and how many failed it: "1/1 9/10(1 failed) 0/40".
func stepsCell(s *uprevv1.Sync) string {
	cells := make([]string, len(s.Status.Steps))
	for i, step := range s.Status.Steps {
		cells[i] = fmt.Sprintf("%d/%d", step.OnRevision, step.Targets)
		if step.Failed > 0 {
			cells[i] += fmt.Sprintf("(%d failed)", step.Failed)
		}
	}
	return strings.Join(cells, " ")
}

// holdRecord is one hold as -o yaml and -o json print it.
type holdRecord struct {
	// Namespace of the automation.
	Namespace string `json:"namespace"`
	// Automation is the automation's name.
	Automation string `json:"automation"`
	// AutomationKind is its kind: UpdateAutomation or ImageUpdateAutomation.
	AutomationKind string `json:"automationKind"`
	// Policy is `<namespace>/<name>` of the ImagePolicy.
	Policy string `json:"policy,omitempty"`
	// Version is the held version.
	Version string `json:"version,omitempty"`
	// RevertedIn is the SHA of the commit that holds the version: the
	// revert, or the rejection's commit.
	RevertedIn string `json:"revertedIn,omitempty"`
	// Reason is why the version was rejected (`uprev reject`); empty for
	// a revert.
	Reason string `json:"reason,omitempty"`
	// Released says that the automation's release annotation releases the
	// hold; it goes at the automation's next run.
	Released bool `json:"released"`
	// Omitted, in a record of its own that names no hold, counts the
	// holds of an ImageUpdateAutomation its annotation does not list
	// (past uprevv1.MaxPublishedHolds).
	Omitted int `json:"omitted,omitempty"`
}

// holdsNoun lists the holds in force of UpdateAutomations (from their
// status) and of Flux ImageUpdateAutomations (from the annotation the
// manager publishes): versions not written because a person reverted or
// rejected them, the rejections with their reasons. Names are
// automations' names.
func holdsNoun() Noun {
	return Noun{
		Name:        "holds",
		Watches:     func() client.ObjectList { return &uprevv1.UpdateAutomationList{} },
		AlsoWatches: func() client.ObjectList { return &iacv1.ImageUpdateAutomationList{} },
		Aliases:     []string{"hold"},
		Short:       "List the versions automations hold because someone reverted or rejected them",
		Read: func(ctx context.Context, c client.Reader, q Query) (*Table, error) {
			autos, err := readHeldAutomations(ctx, c, q)
			if err != nil {
				return nil, err
			}
			t := &Table{Columns: []Column{
				{Header: "AUTOMATION"}, {Header: "KIND"}, {Header: "POLICY"}, {Header: "VERSION"}, {Header: "REVERTED IN"}, {Header: "RELEASED"}, {Header: "REASON"},
			}}
			for _, a := range autos {
				ns, name := a.Object.GetNamespace(), a.Object.GetName()
				releases := guard.ParseReleases(a.Object.GetAnnotations()[uprevv1.HoldReleaseAnnotation])
				for _, h := range a.Holds {
					released := releases.Released(guardHold(h))
					t.Rows = append(t.Rows, Row{
						Namespace: ns,
						Cells:     []string{name, a.Kind, h.Policy, h.Version, shortSHA(h.RevertedIn), boolCell(released), holdReason(h)},
						Object: holdRecord{Namespace: ns, Automation: name, AutomationKind: a.Kind, Policy: h.Policy, Version: h.Version,
							RevertedIn: h.RevertedIn, Reason: h.Reason, Released: released},
					})
				}
				if a.Omitted > 0 {
					t.Rows = append(t.Rows, Row{
						Namespace: ns,
						Cells:     []string{name, a.Kind, fmt.Sprintf("(%d more, not published)", a.Omitted), "", "", "", ""},
						Object:    holdRecord{Namespace: ns, Automation: name, AutomationKind: a.Kind, Omitted: a.Omitted},
					})
				}
			}
			return t, nil
		},
	}
}

// gatesNoun lists ReleaseGates: how many policies each gates and how many
// versions wait at it; wide shows the first waiting version per policy.
func gatesNoun() Noun {
	return Noun{
		Name:    "gates",
		Watches: func() client.ObjectList { return &uprevv1.ReleaseGateList{} },
		Aliases: []string{"gate", "releasegates", "releasegate"},
		Short:   "List ReleaseGates and the versions waiting at them",
		Read: func(ctx context.Context, c client.Reader, q Query) (*Table, error) {
			var list uprevv1.ReleaseGateList
			gates, err := readObjects[uprevv1.ReleaseGate](ctx, c, uprevv1.GroupVersion.WithKind(uprevv1.ReleaseGateKind), &list, &list.Items, q)
			if err != nil {
				return nil, err
			}
			t := &Table{Columns: []Column{
				{Header: "NAME"}, {Header: "POLICIES"}, {Header: "WAITING"}, {Header: "READY"}, {Header: "STATUS"}, {Header: "AGE"},
				{Header: "MIN-AGE", Wide: true}, {Header: "PROMOTION", Wide: true}, {Header: "NEXT", Wide: true},
			}}
			for _, rg := range gates {
				ready, message := readyCells(rg.Status.Conditions)
				waiting := 0
				var next []string
				for _, p := range rg.Status.Policies {
					waiting += len(p.Waiting)
					if len(p.Waiting) > 0 {
						next = append(next, p.Name+": "+waitingCell(p.Waiting[0], q.Now))
					}
				}
				t.Rows = append(t.Rows, Row{Namespace: rg.Namespace, Object: rg, Cells: []string{
					rg.Name, strconv.Itoa(len(rg.Status.Policies)), strconv.Itoa(waiting), ready, message, age(rg.CreationTimestamp, q.Now),
					rg.Spec.MinReleaseAge, promotionCell(rg.Spec.Promotion), strings.Join(next, ", "),
				}})
			}
			return t, nil
		},
	}
}

// promotionCell says what a gate's promotion asks, Sync, targets and
// healthyFor: "staging: eu-staging,us-staging for 24h", "staging: all
// targets"; empty without a promotion.
func promotionCell(p *uprevv1.Promotion) string {
	if p == nil {
		return ""
	}
	targets := "all targets"
	if len(p.Targets) > 0 {
		targets = strings.Join(p.Targets, ",")
	}
	cell := p.Sync + ": " + targets
	if p.HealthyFor != "" {
		cell += " for " + p.HealthyFor
	}
	return cell
}

// waitingCell says which version waits at which gate and for how long
// still: "1.5.1 (age, 2d 4h)".
func waitingCell(w uprevv1.WaitingVersion, now time.Time) string {
	return w.Tag + " (" + fleet.WaitText(w, now) + ")"
}

// holdReason is the REASON cell of a hold: the rejection's reason, or
// "(reverted)" for a revert. Cells pass printable.String.
func holdReason(h uprevv1.Hold) string {
	if h.Reason == "" {
		return "(reverted)"
	}
	return h.Reason
}
