package controllers

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/update"
)

// pullRequestGroup is one group of changes written to a branch of its own
// and proposed in a pull request of its own
// (spec.git.push.pullRequest.groupBy).
type pullRequestGroup struct {
	// name is the group's name, empty for the changes that stay on the
	// push branch.
	name string
	// keys are the group's policies and sources.
	keys []update.PolicyKey
}

// groupBy returns spec.git.push.pullRequest.groupBy, "" when the
// automation does not group its changes.
func groupBy(auto *uprevv1.UpdateAutomation) string {
	push := auto.Spec.Git.Push
	if push == nil || push.PullRequest == nil || push.PullRequest.GroupBy == uprevv1.GroupByNone {
		return ""
	}
	return push.PullRequest.GroupBy
}

// validateGroupBy checks that groupBy is none, policy or a label key.
func validateGroupBy(groupBy string) error {
	if groupBy == "" || groupBy == uprevv1.GroupByNone || groupBy == uprevv1.GroupByPolicy {
		return nil
	}
	if errs := validation.IsQualifiedName(groupBy); len(errs) > 0 {
		return stalledf(uprevv1.InvalidSpecReason, "spec.git.push.pullRequest.groupBy %q is neither none, policy nor a label key: %s", groupBy, strings.Join(errs, "; "))
	}
	return nil
}

// pullRequestGroups parts the run's policies and sources into groups,
// sorted by name; nil when the automation does not group.
func pullRequestGroups(run *automationRun) []pullRequestGroup {
	by := groupBy(run.auto)
	if by == "" {
		return nil
	}
	byName := map[string][]update.PolicyKey{}
	for key := range run.planned {
		name := groupName(by, key, run.labelsOf(key))
		byName[name] = append(byName[name], key)
	}
	groups := make([]pullRequestGroup, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		groups = append(groups, pullRequestGroup{name: name, keys: byName[name]})
	}
	return groups
}

// groupName is the group of the policy or source key with labels.
func groupName(by string, key update.PolicyKey, labels map[string]string) string {
	if by == uprevv1.GroupByPolicy {
		return key.Name
	}
	return labels[by]
}

// liveGroupNames are the names of groups, and those of the selected
// policies and sources not ready yet: their groups are not gone.
func liveGroupNames(run *automationRun, groups []pullRequestGroup) []string {
	var names []string
	for _, grp := range groups {
		names = append(names, grp.name)
	}
	for key, labels := range run.unready {
		if name := groupName(groupBy(run.auto), key, labels); !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// labelsOf returns the labels of the policy or source key.
func (run *automationRun) labelsOf(key update.PolicyKey) map[string]string {
	if pol, ok := run.policies[key]; ok {
		return pol.Labels
	}
	if rs, ok := run.sources[key]; ok {
		return rs.Labels
	}
	return nil
}

// groupBranch is the branch of group: `<push branch>-<group>`, with the
// dots of a label value made dashes (Git refuses `..` and `.lock`); the
// push branch itself for the unnamed group.
func groupBranch(pushBranch, group string) string {
	if group == "" {
		return pushBranch
	}
	return pushBranch + "-" + strings.ReplaceAll(group, ".", "-")
}

// groupTitle is the title of a group's pull request: the commit's subject
// followed by the group, such as `Update agent to 1.2.0 (policy agent)`.
func groupTitle(title, groupBy, group string) string {
	if group == "" {
		return title
	}
	return fmt.Sprintf("%s (%s %s)", title, groupBy, group)
}

// groupRun returns the run of one group: the automation as one whose push
// branch is the group's and whose pull request is the group's, with the
// group's policies and sources only, sharing the run's session.
func (run *automationRun) groupRun(grp pullRequestGroup) *automationRun {
	auto := run.auto.DeepCopy()
	auto.Spec.Git.Push.Branch = groupBranch(run.auto.PushBranch(), grp.name)
	auto.Status.PullRequest = nil
	for i := range run.auto.Status.PullRequests {
		if pr := run.auto.Status.PullRequests[i]; pr.Group == grp.name {
			auto.Status.PullRequest = &pr
		}
	}
	g := &automationRun{auto: auto, front: run.front, progress: run.progress, session: run.session, group: &grp,
		policies: map[update.PolicyKey]*imagev1.ImagePolicy{}, planned: map[update.PolicyKey]guard.Policy{},
		sources: map[update.PolicyKey]*uprevv1.ReleaseSource{}, assets: map[update.AssetKey]string{}}
	for _, key := range grp.keys {
		g.planned[key] = run.planned[key]
		if pol, ok := run.policies[key]; ok {
			g.policies[key] = pol
		}
		if rs, ok := run.sources[key]; ok {
			g.sources[key] = rs
		}
	}
	for k, v := range run.assets {
		if slices.Contains(grp.keys, k.Source) {
			g.assets[k] = v
		}
	}
	return g
}

// writePhases are the phases that write one push branch and propose it.
func (r *UpdateAutomationReconciler) writePhases() []func(context.Context, *automationRun) error {
	return []func(context.Context, *automationRun) error{r.readHolds, r.readCRDs, r.writeBack, r.ensurePullRequest}
}

// writeGroups writes the push branch and proposes it; or, when the
// automation groups its changes, each group's branch in turn, on the one
// session, retiring the branch of a group whose changes are all in the
// base branch and then those of the groups that are gone
// (proposeOrRetire, retireGoneGroups): a group that fails leaves the
// others to run, and the run fails with the first group's error. Whatever
// the groups did is folded into the run for status.
func (r *UpdateAutomationReconciler) writeGroups(ctx context.Context, run *automationRun) error {
	groups := pullRequestGroups(run)
	if groups == nil {
		for _, phase := range r.writePhases() {
			if err := phase(ctx, run); err != nil {
				return err
			}
		}
		return nil
	}
	if err := r.readHolds(ctx, run); err != nil {
		return err
	}
	defer run.foldGroups()
	run.groupNames = liveGroupNames(run, groups)
	var first error
	for _, grp := range groups {
		g := run.groupRun(grp)
		run.groups = append(run.groups, g)
		if err := run.session.UsePushBranch(ctx, g.auto.PushBranch()); err != nil {
			return gitError(err)
		}
		for _, phase := range []func(context.Context, *automationRun) error{r.readHolds, r.readCRDs, r.writeBack, r.proposeOrRetire} {
			if err := phase(ctx, g); err != nil {
				first = cmp.Or(first, err)
				break
			}
		}
		run.retired = append(run.retired, g.retired...)
	}
	return cmp.Or(first, r.retireGoneGroups(ctx, run))
}

// foldGroups makes what the groups' runs found the run's, as status reads
// it: their rewrites' results (each file error once), their CRD bundles,
// and the branch tip.
func (run *automationRun) foldGroups() {
	run.result = update.Result{}
	run.rewritten, run.crdsRead = true, true
	run.crds = nil
	seen := map[string]bool{}
	for _, g := range run.groups {
		res := g.result
		run.result.Changes = append(run.result.Changes, res.Changes...)
		run.result.Refused = append(run.result.Refused, res.Refused...)
		run.result.Unresolved = append(run.result.Unresolved, res.Unresolved...)
		for _, fe := range res.FileErrors {
			if !seen[fe.Error()] {
				seen[fe.Error()] = true
				run.result.FileErrors = append(run.result.FileErrors, fe)
			}
		}
		run.rewritten = run.rewritten && g.rewritten
		run.crdsRead = run.crdsRead && g.crdsRead
		run.crds = append(run.crds, g.crds...)
		run.crdLines = append(run.crdLines, g.crdLines...)
	}
	run.revisions = revisions{source: run.session.Revision()}
}

// held returns the holds in force: the run's, and those its groups found
// on their branches.
func (run *automationRun) held() []guard.Hold {
	var held []guard.Hold
	if run.rules != nil {
		held = append(held, run.rules.Held()...)
	}
	for _, g := range run.groups {
		if g.rules == nil {
			continue
		}
		for _, h := range g.rules.Held() {
			if !slices.ContainsFunc(held, func(k guard.Hold) bool { return k.Policy == h.Policy && k.Version == h.Version }) {
				held = append(held, h)
			}
		}
	}
	return held
}

// pushed returns the runs that pushed a commit: the run, or its groups.
func (run *automationRun) pushed() []*automationRun {
	var out []*automationRun
	for _, g := range append([]*automationRun{run}, run.groups...) {
		if g.commit != "" {
			out = append(out, g)
		}
	}
	return out
}

// groupPullRequests is status.pullRequests after a run: each group's pull
// request as pullRequestStatus makes it, for the groups the run reached;
// those of groups it did not reach stay as they were, and those of groups
// the run retired (gone, or with nothing left to propose: retireGroup)
// leave. A group that is gone stays until it is retired, and so does one
// left for a person.
func groupPullRequests(prev []uprevv1.PullRequestStatus, run *automationRun) []uprevv1.PullRequestStatus {
	if run.groups == nil && run.retired == nil {
		return prev
	}
	retired := func(group string) bool {
		return slices.ContainsFunc(run.retired, func(r retiredGroup) bool { return r.group == group && r.left == "" })
	}
	out := slices.DeleteFunc(slices.Clone(prev), func(p uprevv1.PullRequestStatus) bool { return retired(p.Group) })
	for _, g := range run.groups {
		if retired(g.group.name) {
			continue
		}
		pr := pullRequestStatus(g.auto.Status.PullRequest, g)
		i := slices.IndexFunc(out, func(p uprevv1.PullRequestStatus) bool { return p.Group == g.group.name })
		switch {
		case pr == nil:
			continue
		case i < 0:
			out = append(out, uprevv1.PullRequestStatus{})
			i = len(out) - 1
		}
		out[i] = *pr
		out[i].Group, out[i].Branch = g.group.name, g.auto.PushBranch()
	}
	slices.SortFunc(out, func(a, b uprevv1.PullRequestStatus) int { return strings.Compare(a.Group, b.Group) })
	return out
}
