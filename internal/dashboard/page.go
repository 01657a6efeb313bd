// Package dashboard serves `uprev dashboard`: a read-only web page of the
// fleet that updates itself as the cluster changes. It reads the cluster
// with the client it is given (the user's own kubeconfig and rights), so it
// opens no new way into the cluster.
//
// Build turns what Load reads into a Page: the fleet matrix and the Syncs'
// rollouts from internal/fleet's read model, the automations' commits,
// pull requests, holds and refused downgrades, and each component's
// history from status and Events. Server renders the Page with
// html/template and pushes every new rendering to open pages as
// server-sent events.
package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/fleet"
	"github.com/uprev-dev/uprev/internal/registry"
)

// HistoryKept says what a component's history is made of and how long each
// part is kept; the page shows it under the histories.
const HistoryKept = `Status keeps, per Sync target, the revision it runs and since when (until the next revision reaches it), and, per ImagePolicy, the latest and the previous version. Events (selected versions, applies, pushes) are kept by the API server for its --event-ttl, one hour unless the cluster sets another.`

// Page is what the dashboard shows.
type Page struct {
	// Scope is the namespace shown; empty means every namespace.
	Scope string
	// Now is when the page was built.
	Now time.Time
	// Fleet is the matrix: components by Sync target.
	Fleet fleet.Table
	// Rollouts are the Syncs' rollouts.
	Rollouts []fleet.Rollout
	// Automations are the UpdateAutomations and Flux's
	// ImageUpdateAutomations.
	Automations []Automation
	// Histories are the components' histories, in the fleet's row order.
	Histories []History
	// Errors are what could not be read; the page shows the rest.
	Errors []string
	// HistoryKept says what the histories are made of (HistoryKept).
	HistoryKept string
}

// Automation is what one UpdateAutomation or Flux ImageUpdateAutomation
// did and holds.
type Automation struct {
	// Kind is UpdateAutomation or ImageUpdateAutomation.
	Kind string
	// Namespace and Name are the automation's.
	Namespace string
	Name      string
	// Ready and Status are its Ready condition's status and message.
	Ready  string
	Status string
	// LastPushCommit and LastPushTime are its last push.
	LastPushCommit string
	LastPushTime   *time.Time
	// Commits are its Pushed events, newest first.
	Commits []Event
	// PullRequest is the pull request of its push branch, if any.
	PullRequest *uprevv1.PullRequestStatus
	// PullRequests are the pull requests of its groups, when it groups
	// its changes (spec.git.push.pullRequest.groupBy).
	PullRequests []uprevv1.PullRequestStatus
	// Holds are the versions it does not write because of a revert: an
	// UpdateAutomation's status.holds, or what the manager publishes in
	// an ImageUpdateAutomation's annotation uprevv1.HoldsAnnotation.
	Holds []Hold
	// HoldsOmitted counts the holds an ImageUpdateAutomation's annotation
	// does not list (past uprevv1.MaxPublishedHolds).
	HoldsOmitted int
	// RefusedDowngrades are the changes it does not make: an
	// UpdateAutomation's status.refusedDowngrades, or what the manager
	// publishes in an ImageUpdateAutomation's annotation
	// uprevv1.HoldsAnnotation.
	RefusedDowngrades []uprevv1.RefusedDowngrade
	// RefusedOmitted counts the refused downgrades an
	// ImageUpdateAutomation's annotation does not list (past
	// uprevv1.MaxPublishedHolds).
	RefusedOmitted int
	// Policies are the versions of its policies it last saw, by policy.
	Policies []ObservedPolicy
}

// Hold is a hold and the command that releases it.
type Hold struct {
	uprevv1.Hold
	// Release is the `uprev release-hold` command that releases it, each
	// argument shell-quoted (ReleaseCommand); empty when Refused says why
	// the page shows none.
	Release string
	// Refused says why there is no Release: a name the command would
	// carry is not a valid object name, which only a hand-written (or
	// forged) holds annotation has.
	Refused string
}

// ObservedPolicy is the version of one policy an automation last saw.
type ObservedPolicy struct {
	// Policy is the policy's name.
	Policy string
	uprevv1.ImageRef
}

// Event is one Kubernetes Event about an uprev object.
type Event struct {
	// Namespace and Name are the Event's.
	Namespace string
	Name      string
	// Time is when it last happened.
	Time time.Time
	// Type is Normal or Warning; Reason its reason; Note its message.
	Type   string
	Reason string
	Note   string
	// Kind and Object name the object the Event is about.
	Kind   string
	Object string
}

// History is what happened to one component.
type History struct {
	// Namespace and Component are the row's (its ImagePolicy's).
	Namespace string
	Component string
	// Entries are newest first.
	Entries []HistoryEntry
}

// HistoryEntry is one thing that happened to a component.
type HistoryEntry struct {
	// Time is when it happened.
	Time time.Time
	// Text says what happened.
	Text string
	// Kind, Namespace and Name are the object it was read from: a Sync
	// (status) or an Event.
	Kind      string
	Namespace string
	Name      string
}

// Inputs are what a Page is built from.
type Inputs struct {
	// Fleet are the objects of the fleet read model.
	Fleet fleet.Inputs
	// FluxAutomations are Flux's ImageUpdateAutomations, which uprev
	// serves.
	FluxAutomations []iacv1.ImageUpdateAutomation
	// Events are the Events of the namespace shown.
	Events []eventsv1.Event
	// Errors are what could not be read.
	Errors []string
}

// Load reads what Build needs in namespace (every namespace when empty).
// What cannot be read is reported in Inputs.Errors, not as an error, so
// the page shows what can be read.
func Load(ctx context.Context, c client.Reader, namespace string, now time.Time) Inputs {
	var in Inputs
	f, err := fleet.Load(ctx, c, namespace)
	if err != nil {
		in.Errors = append(in.Errors, err.Error())
	}
	f.Now = now
	in.Fleet = f
	var flux iacv1.ImageUpdateAutomationList
	// Without Flux's kind installed there are none to show.
	if err := c.List(ctx, &flux, client.InNamespace(namespace)); err != nil && !apimeta.IsNoMatchError(err) {
		in.Errors = append(in.Errors, fmt.Sprintf("listing ImageUpdateAutomations: %v", err))
	}
	in.FluxAutomations = flux.Items
	var events eventsv1.EventList
	if err := c.List(ctx, &events, client.InNamespace(namespace)); err != nil {
		in.Errors = append(in.Errors, fmt.Sprintf("listing Events (the histories show status only): %v", err))
	}
	in.Events = events.Items
	return in
}

// Build makes the page of in, scope being the namespace shown ("" for
// every namespace).
func Build(in Inputs, scope string) Page {
	table := fleet.Build(in.Fleet)
	rollouts := fleet.Rollouts(in.Fleet.Syncs)
	events := eventsOf(in.Events)
	automations, errs := automationsOf(in.Fleet.Automations, in.FluxAutomations, events)
	return Page{
		Scope:       scope,
		Now:         in.Fleet.Now,
		Fleet:       table,
		Rollouts:    rollouts,
		Automations: automations,
		Histories:   historiesOf(table, rollouts, events),
		Errors:      append(slices.Clone(in.Errors), errs...),
		HistoryKept: HistoryKept,
	}
}

// uprevKinds are the kinds whose Events the page shows.
var uprevKinds = []string{uprevv1.SyncKind, uprevv1.UpdateAutomationKind, iacv1.ImageUpdateAutomationKind, "ImagePolicy", "ImageRepository", "ReleaseGate"}

// eventsOf returns the Events about uprev's kinds, newest first.
func eventsOf(list []eventsv1.Event) []Event {
	var events []Event
	for _, e := range list {
		if !slices.Contains(uprevKinds, e.Regarding.Kind) {
			continue
		}
		events = append(events, Event{
			Namespace: e.Namespace, Name: e.Name, Time: eventTime(e),
			Type: e.Type, Reason: e.Reason, Note: e.Note,
			Kind: e.Regarding.Kind, Object: e.Regarding.Name,
		})
	}
	slices.SortStableFunc(events, func(a, b Event) int {
		return cmp.Or(b.Time.Compare(a.Time), strings.Compare(a.Name, b.Name))
	})
	return events
}

// eventTime is when an Event last happened: its series' last observation,
// its event time, or when it was created.
func eventTime(e eventsv1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	default:
		return e.CreationTimestamp.Time
	}
}

// pushedReason is the reason of the Event an automation of either kind
// records for each commit it pushes
// (controllers/updateautomation_controller.go).
const pushedReason = "Pushed"

// automationsOf returns the views of the UpdateAutomations and of Flux's
// ImageUpdateAutomations, by namespace, name and kind, and what could not
// be read of them.
func automationsOf(autos []uprevv1.UpdateAutomation, flux []iacv1.ImageUpdateAutomation, events []Event) ([]Automation, []string) {
	views := make([]Automation, 0, len(autos)+len(flux))
	for _, a := range autos {
		v := Automation{
			Kind: uprevv1.UpdateAutomationKind, Namespace: a.Namespace, Name: a.Name,
			LastPushCommit:    a.Status.LastPushCommit,
			PullRequest:       a.Status.PullRequest,
			PullRequests:      a.Status.PullRequests,
			RefusedDowngrades: a.Status.RefusedDowngrades,
		}
		v.read(a.Status.Conditions, a.Status.LastPushTime, a.Status.Holds, a.Status.ObservedPolicies, events)
		views = append(views, v)
	}
	var errs []string
	for _, a := range flux {
		v := Automation{Kind: iacv1.ImageUpdateAutomationKind, Namespace: a.Namespace, Name: a.Name, LastPushCommit: a.Status.LastPushCommit}
		published, err := uprevv1.DecodeHolds(a.Annotations[uprevv1.HoldsAnnotation])
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s %s/%s: %v", v.Kind, a.Namespace, a.Name, err))
		}
		v.HoldsOmitted = published.Omitted
		v.RefusedDowngrades, v.RefusedOmitted = published.RefusedDowngrades, published.RefusedOmitted
		observed := make(map[string]uprevv1.ImageRef, len(a.Status.ObservedPolicies))
		for name, ref := range a.Status.ObservedPolicies {
			observed[name] = uprevv1.ImageRef{Name: ref.Name, Tag: ref.Tag, Digest: ref.Digest}
		}
		v.read(a.Status.Conditions, a.Status.LastPushTime, published.Holds, observed, events)
		views = append(views, v)
	}
	slices.SortFunc(views, func(a, b Automation) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.Kind, b.Kind))
	})
	return views, errs
}

// read fills in what both kinds of automation report alike: readiness,
// the last push's time, the commits (Pushed Events about it), the holds
// with their release commands and the versions last seen.
func (v *Automation) read(conditions []metav1.Condition, pushed *metav1.Time, holds []uprevv1.Hold, observed map[string]uprevv1.ImageRef, events []Event) {
	if c := apimeta.FindStatusCondition(conditions, meta.ReadyCondition); c != nil {
		v.Ready, v.Status = string(c.Status), c.Message
	}
	if pushed != nil {
		v.LastPushTime = &pushed.Time
	}
	for _, e := range events {
		if e.Kind == v.Kind && e.Namespace == v.Namespace && e.Object == v.Name && e.Reason == pushedReason {
			v.Commits = append(v.Commits, e)
		}
	}
	for _, h := range holds {
		hold := Hold{Hold: h}
		if command, err := ReleaseCommand(v.Namespace, v.Name, h.Policy); err != nil {
			hold.Refused = "No release command is shown: " + err.Error()
		} else {
			hold.Release = command
		}
		v.Holds = append(v.Holds, hold)
	}
	for name, ref := range observed {
		v.Policies = append(v.Policies, ObservedPolicy{Policy: name, ImageRef: ref})
	}
	slices.SortFunc(v.Policies, func(x, y ObservedPolicy) int { return strings.Compare(x.Policy, y.Policy) })
}

// historiesOf returns each row's history: when each target got the
// version it runs (Sync status), and the Events of the policy and of the
// Syncs that deploy it.
func historiesOf(t fleet.Table, rollouts []fleet.Rollout, events []Event) []History {
	histories := make([]History, 0, len(t.Rows))
	for _, r := range t.Rows {
		h := History{Namespace: r.Namespace, Component: r.Component}
		syncs := map[string]bool{}
		for i, c := range r.Cells {
			if c.State != fleet.NotDeployed {
				syncs[t.Columns[i].Sync] = true
			}
		}
		for _, ro := range rollouts {
			if syncs[ro.Namespace+"/"+ro.Name] {
				h.Entries = append(h.Entries, statusEntries(ro, r.Image)...)
			}
		}
		for _, e := range events {
			switch {
			case e.Kind == "ImagePolicy" && e.Namespace == r.Namespace && e.Object == r.Component,
				e.Kind == uprevv1.SyncKind && syncs[e.Namespace+"/"+e.Object]:
				h.Entries = append(h.Entries, HistoryEntry{
					Time: e.Time, Text: e.Kind + " " + e.Object + ": " + e.Note,
					Kind: "Event", Namespace: e.Namespace, Name: e.Name,
				})
			}
		}
		slices.SortStableFunc(h.Entries, func(a, b HistoryEntry) int { return b.Time.Compare(a.Time) })
		histories = append(histories, h)
	}
	return histories
}

// statusEntries are, for each target of a rollout that runs image, since
// when it runs which version.
func statusEntries(ro fleet.Rollout, image string) []HistoryEntry {
	var entries []HistoryEntry
	for _, w := range ro.Waves {
		for _, ts := range w.Targets {
			if ts.Since == nil {
				continue
			}
			var versions []string
			for _, c := range ts.Components {
				if sameImage(c.Image, image) {
					versions = append(versions, c.Tag)
				}
			}
			if len(versions) == 0 {
				continue
			}
			entries = append(entries, HistoryEntry{
				Time: *ts.Since,
				Text: fmt.Sprintf("%s got %s (%s)", ts.Name, strings.Join(versions, ", "), ts.AppliedRevision),
				Kind: uprevv1.SyncKind, Namespace: ro.Namespace, Name: ro.Name,
			})
		}
	}
	return entries
}

// sameImage says whether canonical (a canonical image name) is image.
func sameImage(canonical, image string) bool {
	name, err := registry.CanonicalName(image)
	return err == nil && name == canonical
}
