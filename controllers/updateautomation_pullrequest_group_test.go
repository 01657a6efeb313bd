package controllers

import (
	"context"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteasdk "code.gitea.io/sdk/gitea"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/testenv/gitea"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/update"
)

// TestGroupByPolicyOpensAPullRequestPerPolicyOnGitea: on a real Gitea,
// groupBy policy with two policies, agent and app, opens two pull
// requests, each from a branch of its own holding its policy's change
// only, with the policy in its title; a newer version of agent updates
// agent's pull request in place and leaves app's as it was.
func TestGroupByPolicyOpensAPullRequestPerPolicyOnGitea(t *testing.T) {
	t.Parallel() // its Gitea, registry, namespace and objects are its own
	g := NewWithT(t)
	ns := newNamespace(t)
	srv, reg := gitea.Start(t), registry.Start(t)
	image := reg.Image("acme/agent")
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	marked := func(policy string) string {
		return strings.NewReplacer("IMAGE", image, "NS:agent", ns+":"+policy).Replace(withVersion(agentMarked, "1.0.0"))
	}
	gitURL := srv.CreateRepo(t, fleetRepo, "main", map[string]string{"apps/agent.yaml": marked("agent"), "apps/app.yaml": marked("app")})
	repo := newRepository(t, ns, image)
	agent := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"))
	app := newPolicy(t, ns, "app", semverChoice(">=1.0.0 <1.2.0"))
	waitForLatestTag(t, agent, "1.1.0")
	waitForLatestTag(t, app, "1.1.0")
	g.Expect(k8s.Create(context.Background(), secretWith(ns, "git", map[string][]byte{
		"username": []byte(srv.Admin), "password": []byte(srv.Token),
	}))).To(Succeed())
	auto := newAutomation(t, ns, gitURL, withSecret("git"), withPullRequest(uprevv1.PullRequestSpec{
		Provider: "gitea", URL: srv.URL, GroupBy: uprevv1.GroupByPolicy,
	}))
	api := srv.Client(t)
	tip := func(g Gomega, branch string) string {
		b, _, err := api.GetRepoBranch(srv.Admin, fleetRepo, branch)
		g.Expect(err).NotTo(HaveOccurred())
		return b.Commit.ID
	}
	file := func(g Gomega, branch, name string) string {
		content, _, err := api.GetFile(srv.Admin, fleetRepo, branch, name)
		g.Expect(err).NotTo(HaveOccurred())
		return string(content)
	}
	// groups checks that each group's pull request is up to date with
	// its branch on Gitea and returns them by group.
	groups := func(g Gomega) map[string]uprevv1.PullRequestStatus {
		out := map[string]uprevv1.PullRequestStatus{}
		st := getAutomation(g, auto).Status
		g.Expect(st.PullRequests).To(HaveLen(2))
		g.Expect(st.PullRequest).To(BeNil(), "no pull request from the push branch itself")
		for _, pr := range st.PullRequests {
			g.Expect(pr.Number).To(BeNumerically(">", 0))
			g.Expect(pr.HeadCommit).To(Equal(tip(g, pr.Branch)), "the pull request of %s is up to date", pr.Group)
			out[pr.Group] = pr
		}
		return out
	}
	openPullRequests := func(g Gomega) map[string]*giteasdk.PullRequest {
		prs, _, err := api.ListRepoPullRequests(srv.Admin, fleetRepo, giteasdk.ListPullRequestsOptions{State: giteasdk.StateOpen})
		g.Expect(err).NotTo(HaveOccurred())
		byHead := map[string]*giteasdk.PullRequest{}
		for _, pr := range prs {
			byHead[pr.Head.Ref] = pr
		}
		return byHead
	}

	var first map[string]uprevv1.PullRequestStatus
	g.Eventually(func(g Gomega) { first = groups(g) }).Should(Succeed())
	g.Expect(first).To(HaveKey("agent"))
	g.Expect(first).To(HaveKey("app"))
	g.Expect(first["agent"].Branch).To(Equal("uprev/updates-agent"))
	g.Expect(first["app"].Branch).To(Equal("uprev/updates-app"))
	g.Expect(first["agent"].Number).NotTo(Equal(first["app"].Number))
	prs := openPullRequests(g)
	g.Expect(prs).To(HaveLen(2))
	g.Expect(prs["uprev/updates-agent"].Title).To(Equal("Update agent to 1.1.0 (policy agent)"))
	g.Expect(prs["uprev/updates-app"].Title).To(Equal("Update app to 1.1.0 (policy app)"))
	for _, pr := range prs {
		g.Expect(pr.Base.Ref).To(Equal("main"))
	}
	g.Expect(file(g, "uprev/updates-agent", "apps/agent.yaml")).To(ContainSubstring(image + ":1.1.0"))
	g.Expect(file(g, "uprev/updates-agent", "apps/app.yaml")).To(ContainSubstring(image+":1.0.0"), "a group's branch holds its own change only")
	g.Expect(file(g, "uprev/updates-app", "apps/app.yaml")).To(ContainSubstring(image + ":1.1.0"))
	g.Expect(file(g, "uprev/updates-app", "apps/agent.yaml")).To(ContainSubstring(image + ":1.0.0"))
	g.Expect(file(g, "main", "apps/agent.yaml")).To(ContainSubstring(image+":1.0.0"), "main is left to the pull requests")
	_, resp, _ := api.GetRepoBranch(srv.Admin, fleetRepo, "uprev/updates")
	g.Expect(resp.StatusCode).To(Equal(404), "nothing goes to the push branch itself")
	ready := conditions.GetMessage(getAutomation(g, auto), "Ready")
	g.Expect(ready).To(ContainSubstring("(agent)"))
	g.Expect(ready).To(ContainSubstring("(app)"))

	// A newer version of agent (only: app's range stops below it).
	reg.PushTags(t, "acme/agent", "1.2.0")
	requestReconcile(t, repo)
	waitForLatestTag(t, agent, "1.2.0")
	var second map[string]uprevv1.PullRequestStatus
	g.Eventually(func(g Gomega) {
		second = groups(g)
		g.Expect(second["agent"].HeadCommit).NotTo(Equal(first["agent"].HeadCommit))
	}).Should(Succeed())
	g.Expect(second["agent"].Number).To(Equal(first["agent"].Number), "the same pull request, updated in place")
	g.Expect(second["app"]).To(Equal(first["app"]), "app's pull request is left as it was")
	prs = openPullRequests(g)
	g.Expect(prs).To(HaveLen(2))
	g.Expect(prs["uprev/updates-agent"].Index).To(Equal(first["agent"].Number))
	g.Expect(prs["uprev/updates-agent"].Head.Sha).To(Equal(second["agent"].HeadCommit))
	g.Expect(prs["uprev/updates-agent"].Body).To(ContainSubstring(ns + "/agent: `1.0.0` --> `1.2.0`"))
	g.Expect(prs["uprev/updates-agent"].Body).NotTo(ContainSubstring(ns + "/app"))
	g.Expect(file(g, "uprev/updates-agent", "apps/agent.yaml")).To(ContainSubstring(image + ":1.2.0"))
	g.Expect(tip(g, "uprev/updates-app")).To(Equal(first["app"].HeadCommit))
}

// TestPullRequestGroups: policy groups by name; a label key by the
// label's value, the policies without it staying on the push branch;
// none groups nothing. A group's branch follows the push branch.
func TestPullRequestGroups(t *testing.T) {
	key := func(name string) update.PolicyKey { return update.PolicyKey{Namespace: "apps", Name: name} }
	run := func(groupBy string) *automationRun {
		auto := pullRequestAutomation(func(a *uprevv1.UpdateAutomation) { a.Spec.Git.Push.PullRequest.GroupBy = groupBy })
		r := &automationRun{auto: auto, planned: map[update.PolicyKey]guard.Policy{}, policies: map[update.PolicyKey]*imagev1.ImagePolicy{}}
		for name, team := range map[string]string{"agent": "platform", "kms": "platform", "web": "", "api": "payments"} {
			pol := &imagev1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name}}
			if team != "" {
				pol.Labels = map[string]string{"example.com/team": team}
			}
			r.planned[key(name)], r.policies[key(name)] = guard.Policy{}, pol
		}
		return r
	}
	names := func(groups []pullRequestGroup) map[string][]string {
		out := map[string][]string{}
		for _, grp := range groups {
			for _, k := range grp.keys {
				out[grp.name] = append(out[grp.name], k.Name)
			}
		}
		return out
	}
	g := NewWithT(t)
	g.Expect(pullRequestGroups(run(""))).To(BeNil())
	g.Expect(pullRequestGroups(run(uprevv1.GroupByNone))).To(BeNil())
	byPolicy := names(pullRequestGroups(run(uprevv1.GroupByPolicy)))
	g.Expect(byPolicy).To(HaveLen(4))
	g.Expect(byPolicy["agent"]).To(ConsistOf("agent"))
	byTeam := pullRequestGroups(run("example.com/team"))
	g.Expect(byTeam[0].name).To(Equal(""), "sorted by name")
	g.Expect(names(byTeam)).To(And(HaveLen(3), HaveKeyWithValue("", ConsistOf("web")),
		HaveKeyWithValue("platform", ConsistOf("agent", "kms")), HaveKeyWithValue("payments", ConsistOf("api"))))

	// A policy not ready yet keeps its group from being gone.
	teams := run("example.com/team")
	teams.unready = map[update.PolicyKey]map[string]string{key("db"): {"example.com/team": "data"}, key("cache"): {"example.com/team": "platform"}}
	g.Expect(liveGroupNames(teams, pullRequestGroups(teams))).To(ConsistOf("", "payments", "platform", "data"))

	g.Expect(groupBranch("uprev/updates", "")).To(Equal("uprev/updates"))
	g.Expect(groupBranch("uprev/updates", "v1.2.lock")).To(Equal("uprev/updates-v1-2-lock"))
	g.Expect(groupTitle("Update agent to 1.2.0", "example.com/team", "platform")).To(Equal("Update agent to 1.2.0 (example.com/team platform)"))
	g.Expect(validateGroupBy("example.com/team")).To(Succeed())
	g.Expect(validateGroupBy("not a key!")).To(MatchError(ContainSubstring(`spec.git.push.pullRequest.groupBy "not a key!" is neither none, policy nor a label key`)))
}

// TestGroupPullRequests: status.pullRequests keeps the pull request of a
// group the run did not reach, takes the new one of a group it reached,
// and drops that of a group the run retired; a group that is gone stays
// until it is retired, and one left for a person stays.
func TestGroupPullRequests(t *testing.T) {
	g := NewWithT(t)
	prev := []uprevv1.PullRequestStatus{
		{Group: "web", Branch: "uprev/updates-web", Number: 3, HeadCommit: "c3"},
		{Group: "gone", Branch: "uprev/updates-gone", Number: 2, HeadCommit: "c2"},
		{Group: "agent", Branch: "uprev/updates-agent", Number: 1, HeadCommit: "c1"},
	}
	g.Expect(groupPullRequests(prev, &automationRun{})).To(Equal(prev), "an automation that does not group")
	agent := pullRequestAutomation(func(a *uprevv1.UpdateAutomation) { a.Spec.Git.Push.Branch = "uprev/updates-agent" })
	reached := &automationRun{auto: agent, group: &pullRequestGroup{name: "agent"},
		pr: pullRequestRun{head: "c4", result: &forge.PullRequest{Number: 1, URL: "https://forge/1", State: forge.StateOpen}}}
	run := &automationRun{groups: []*automationRun{reached}, groupNames: []string{"agent", "web"}}
	g.Expect(groupPullRequests(prev, run)).To(Equal([]uprevv1.PullRequestStatus{
		{Group: "agent", Branch: "uprev/updates-agent", URL: "https://forge/1", Number: 1, State: "open", HeadCommit: "c4"},
		{Group: "gone", Branch: "uprev/updates-gone", Number: 2, HeadCommit: "c2"},
		{Group: "web", Branch: "uprev/updates-web", Number: 3, HeadCommit: "c3"},
	}), "gone, not retired yet")
	run.retired = []retiredGroup{{group: "gone", deleted: true}, {group: "web", left: "it has commits uprev did not make (c5)"}}
	g.Expect(groupPullRequests(prev, run)).To(Equal([]uprevv1.PullRequestStatus{
		{Group: "agent", Branch: "uprev/updates-agent", URL: "https://forge/1", Number: 1, State: "open", HeadCommit: "c4"},
		{Group: "web", Branch: "uprev/updates-web", Number: 3, HeadCommit: "c3"},
	}), "gone retired, web left")
	run.retired = []retiredGroup{{group: "agent", closed: &forge.PullRequest{Number: 1}}}
	g.Expect(groupPullRequests(prev, run)).NotTo(ContainElement(HaveField("Group", "agent")), "a group whose changes are all in the base")
	allGone := &automationRun{retired: []retiredGroup{{group: "web", deleted: true}, {group: "gone", deleted: true}, {group: "agent", deleted: true}}}
	g.Expect(groupPullRequests(prev, allGone)).To(BeEmpty(), "every policy deleted: no group runs, all retire")
}

// TestOthersCommits: a branch is uprev's alone when every commit its base
// does not have is authored and committed as the automation's author.
func TestOthersCommits(t *testing.T) {
	g := NewWithT(t)
	uprev := uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}
	own := gitrepo.BranchCommit{SHA: "1111111111aa", AuthorName: "uprev", AuthorEmail: "uprev@example.com", CommitterEmail: "uprev@example.com"}
	g.Expect(othersCommits(nil, true, uprev)).To(BeEmpty())
	g.Expect(othersCommits([]gitrepo.BranchCommit{own, own}, true, uprev)).To(BeEmpty())
	alice := gitrepo.BranchCommit{SHA: "2222222222bb", AuthorName: "Alice", AuthorEmail: "alice@example.com", CommitterEmail: "alice@example.com"}
	amended := own
	amended.SHA, amended.CommitterEmail = "3333333333cc", "alice@example.com"
	g.Expect(othersCommits([]gitrepo.BranchCommit{own, alice, amended}, true, uprev)).To(Equal("it has commits uprev did not make (2222222222, 3333333333)"))
	g.Expect(othersCommits([]gitrepo.BranchCommit{own}, false, uprev)).To(Equal("it has more than 100 commits its base does not have"))
}

// TestRetiredGroupSummary: the Ready message says what a run did to a
// group with nothing left to propose, or why it left it.
func TestRetiredGroupSummary(t *testing.T) {
	g := NewWithT(t)
	gone := retiredGroup{group: "app", branch: "uprev/updates-app", why: "the group is gone"}
	g.Expect(gone.summary()).To(BeEmpty(), "nothing to do: branch and pull request already gone")
	closed := gone
	closed.closed, closed.deleted = &forge.PullRequest{Number: 4}, true
	g.Expect(closed.summary()).To(Equal("closed pull request #4 and deleted branch uprev/updates-app (app): the group is gone"))
	left := gone
	left.left = "it has commits uprev did not make (3f1c2a9b0d)"
	g.Expect(left.summary()).To(Equal("left branch uprev/updates-app (app) and its pull request for a person: the group is gone, but it has commits uprev did not make (3f1c2a9b0d)"))
	moved := gone
	moved.closed, moved.left = &forge.PullRequest{Number: 4}, "someone pushed to it meanwhile"
	g.Expect(moved.summary()).To(Equal("closed pull request #4 (app): the group is gone; left branch uprev/updates-app for a person: someone pushed to it meanwhile"))
}
