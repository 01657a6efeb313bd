package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/update"
)

// recordStatus writes what the run saw and did into status, and records
// events for new refusals and for a push.
func (r *UpdateAutomationReconciler) recordStatus(ctx context.Context, run *automationRun) {
	auto := run.auto
	before := auto.Status.RefusedDowngrades
	auto.Status = automationStatus(auto.Status, run, metav1.Now())
	if run.front.statusChanged != nil {
		run.front.statusChanged(auto.Status)
	}
	for _, d := range auto.Status.RefusedDowngrades {
		if !slices.Contains(before, d) {
			r.Events.Eventf(run.front.object, nil, corev1.EventTypeWarning, "DowngradeRefused", "Update",
				"%s: %s stays at %s; the policy selects the lower %s (set spec.allowDowngrade to allow it)", d.File, d.Policy, d.Current, d.Selected)
		}
	}
	for _, p := range run.pushed() {
		branch := p.auto.PushBranch()
		r.pushes.pushed(ctx, auto.Spec.Git.URL, branch)
		r.Events.Eventf(run.front.object, nil, corev1.EventTypeNormal, pushedReason, "Push",
			"Pushed commit %s to %s: %s", shortSHA(p.commit), branch, update.Subject(update.CommitData{Updates: p.result.Updates()}))
		ctrl.LoggerFrom(ctx).Info("Pushed commit", "commit", p.commit, "branch", branch, "changes", len(p.result.Changes))
	}
}

// automationStatus returns the status a run leaves: what each phase that
// ran to the end found replaces what an earlier run had found, and what a
// phase that did not get so far would have found stays as it was. It is
// pure, so every way a run can end is covered by table tests.
func automationStatus(prev uprevv1.UpdateAutomationStatus, run *automationRun, now metav1.Time) uprevv1.UpdateAutomationStatus {
	st := *prev.DeepCopy()
	if run.policies != nil {
		st.ObservedPolicies = observedPolicies(run.policies, run.sources)
	}
	if run.rules != nil {
		st.Holds = holdStatus(run.held())
	}
	if run.crdsRead && !run.unchanged {
		st.CRDs = crdStatus(run)
	}
	st.RefusedDowngrades = refusedDowngrades(st.RefusedDowngrades, run)
	if run.revisions.source != "" {
		st.ObservedSourceRevision = run.revisions.source
		st.ObservedPushRevision = run.revisions.push
	}
	for _, p := range run.pushed() {
		st.LastPushCommit = p.commit
		st.LastPushTime = &now
	}
	st.PullRequest = pullRequestStatus(st.PullRequest, run)
	st.PullRequests = groupPullRequests(st.PullRequests, run)
	return st
}

// refusedDowngrades are the downgrades refused by the run's rewrite, or
// prev when the run did not get to rewrite.
func refusedDowngrades(prev []uprevv1.RefusedDowngrade, run *automationRun) []uprevv1.RefusedDowngrade {
	if !run.rewritten {
		return prev
	}
	var refused []uprevv1.RefusedDowngrade
	for _, refusal := range run.result.Refused {
		if guard.KindOf(refusal.Reason) != guard.RefusalDowngrade {
			continue
		}
		c := refusal.Change
		refused = append(refused, uprevv1.RefusedDowngrade{Policy: c.Policy.String(), File: c.File, Current: c.Old.Tag, Selected: c.New.Tag})
	}
	return refused
}

// summary is the Ready message of a successful run.
func (run *automationRun) summary() string {
	var parts []string
	pushed := run.pushed()
	for _, p := range pushed {
		parts = append(parts, fmt.Sprintf("pushed %s to %s", shortSHA(p.commit), p.auto.PushBranch()))
	}
	switch {
	case len(pushed) > 0:
	case run.unchanged:
		parts = append(parts, "no change: nothing new since "+run.revisions.source)
	default:
		parts = append(parts, "no change")
	}
	for _, g := range append([]*automationRun{run}, run.groups...) {
		if s := g.pullRequestSummary(); s != "" {
			parts = append(parts, s)
		}
	}
	for _, g := range run.retired {
		if s := g.summary(); s != "" {
			parts = append(parts, s)
		}
	}
	if n := len(run.held()); n > 0 {
		parts = append(parts, fmt.Sprintf("%d held", n))
	}
	if n := len(run.auto.Status.RefusedDowngrades); n > 0 {
		parts = append(parts, fmt.Sprintf("%d downgrades refused", n))
	}
	if len(run.notReady) > 0 {
		parts = append(parts, "skipped policies not ready: "+strings.Join(run.notReady, ", "))
	}
	return strings.Join(parts, "; ")
}

// shortSHA abbreviates a commit SHA for messages.
func shortSHA(sha string) string {
	return sha[:min(len(sha), 10)]
}
