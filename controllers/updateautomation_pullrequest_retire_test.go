package controllers

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	giteasdk "code.gitea.io/sdk/gitea"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitea"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// TestGroupsWithNothingToProposeAreRetiredOnGitea: on a real Gitea,
// groupBy policy with three policies opens three pull requests. Then a
// person squash-merges agent's, pushes a commit of their own to web's
// branch, and deletes the policies app and web. The next run deletes
// agent's branch (its change is in main; its pull request stays merged),
// deletes app's branch and closes its pull request (the group is gone),
// and leaves web's branch and open pull request as they are, saying so in
// the Ready message, as the branch has a commit uprev did not make;
// status.pullRequests keeps web only.
func TestGroupsWithNothingToProposeAreRetiredOnGitea(t *testing.T) {
	t.Parallel() // its Gitea, registry, namespace and objects are its own
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	srv, reg := gitea.Start(t), registry.Start(t)
	image := reg.Image("acme/agent")
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	files := map[string]string{}
	names := []string{"agent", "app", "web"}
	for _, name := range names {
		files["apps/"+name+".yaml"] = strings.NewReplacer("IMAGE", image, "NS:agent", ns+":"+name).Replace(withVersion(agentMarked, "1.0.0"))
	}
	gitURL := srv.CreateRepo(t, fleetRepo, "main", files)
	newRepository(t, ns, image)
	policies := map[string]*imagev1.ImagePolicy{}
	for _, name := range names {
		policies[name] = newPolicy(t, ns, name, semverChoice(">=1.0.0"))
		waitForLatestTag(t, policies[name], "1.1.0")
	}
	g.Expect(k8s.Create(ctx, secretWith(ns, "git", map[string][]byte{
		"username": []byte(srv.Admin), "password": []byte(srv.Token),
	}))).To(Succeed())
	auto := newAutomation(t, ns, gitURL, withSecret("git"), withPullRequest(uprevv1.PullRequestSpec{
		Provider: "gitea", URL: srv.URL, GroupBy: uprevv1.GroupByPolicy,
	}))
	api := srv.Client(t)
	numbers := map[string]int64{}
	g.Eventually(func(g Gomega) {
		prs := getAutomation(g, auto).Status.PullRequests
		g.Expect(prs).To(HaveLen(3))
		for _, pr := range prs {
			g.Expect(pr.Number).To(BeNumerically(">", 0))
			numbers[pr.Group] = pr.Number
		}
	}).Should(Succeed())

	// A person squash-merges agent's pull request (Gitea checks in the
	// background whether it can be merged first).
	g.Eventually(func() bool {
		merged, _, err := api.MergePullRequest(srv.Admin, fleetRepo, numbers["agent"], giteasdk.MergePullRequestOption{Style: giteasdk.MergeStyleSquash})
		return err == nil && merged
	}).Should(BeTrue())
	g.Expect(readGiteaFile(g, api, srv.Admin, "main", "apps/agent.yaml")).To(ContainSubstring(image + ":1.1.0"))
	st := runAutomation(t, auto)
	g.Expect(conditions.GetMessage(auto, "Ready")).To(ContainSubstring("deleted branch uprev/updates-agent (agent): its changes are all in main"))
	g.Expect(st.PullRequests).To(HaveLen(2))
	g.Expect(st.PullRequests).NotTo(ContainElement(HaveField("Group", "agent")))
	// ...pushes to web's branch, and deletes the policies app and web.
	_, _, err := api.CreateFile(srv.Admin, fleetRepo, "apps/notes.md", giteasdk.CreateFileOptions{
		FileOptions: giteasdk.FileOptions{BranchName: "uprev/updates-web", Message: "A note of mine"},
		Content:     base64.StdEncoding.EncodeToString([]byte("mine\n")),
	})
	g.Expect(err).NotTo(HaveOccurred())
	webTip := giteaTip(g, api, srv.Admin, "uprev/updates-web")
	for _, name := range []string{"app", "web"} {
		g.Expect(k8s.Delete(ctx, policies[name])).To(Succeed())
	}

	g.Eventually(func(g Gomega) {
		st := getAutomation(g, auto).Status
		g.Expect(st.PullRequests).To(HaveLen(1))
		g.Expect(st.PullRequests[0].Group).To(Equal("web"))
	}).Should(Succeed())
	for _, branch := range []string{"uprev/updates-agent", "uprev/updates-app"} {
		_, resp, _ := api.GetRepoBranch(srv.Admin, fleetRepo, branch)
		g.Expect(resp.StatusCode).To(Equal(404), "%s is deleted", branch)
	}
	g.Expect(giteaTip(g, api, srv.Admin, "uprev/updates-web")).To(Equal(webTip), "the person's commit stays")
	state := func(n int64) string {
		pr, _, err := api.GetPullRequest(srv.Admin, fleetRepo, n)
		g.Expect(err).NotTo(HaveOccurred())
		if pr.HasMerged {
			return "merged"
		}
		return string(pr.State)
	}
	g.Expect(state(numbers["agent"])).To(Equal("merged"))
	g.Expect(state(numbers["app"])).To(Equal("closed"))
	g.Expect(state(numbers["web"])).To(Equal("open"))
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(automationEvents(g, ns, auto.Name))).To(ContainElement(fmt.Sprintf(
			"Normal PullRequestClosed: Closed pull request #%d from uprev/updates-app: the group is gone (its policies were deleted or relabelled)", numbers["app"])))
	}).Should(Succeed())

	// Every run leaves web's branch and pull request, and says so.
	st = runAutomation(t, auto)
	g.Expect(conditions.GetMessage(auto, "Ready")).To(ContainSubstring(
		"left branch uprev/updates-web (web) and its pull request for a person: the group is gone (its policies were deleted or relabelled), but it has commits uprev did not make (%s)", webTip[:10]))
	g.Expect(st.PullRequests).To(HaveLen(1))
	g.Expect(state(numbers["web"])).To(Equal("open"))
	g.Expect(giteaTip(g, api, srv.Admin, "uprev/updates-web")).To(Equal(webTip))
}

// giteaTip is the commit at the tip of branch of the fleet repository.
func giteaTip(g Gomega, api *giteasdk.Client, owner, branch string) string {
	b, _, err := api.GetRepoBranch(owner, fleetRepo, branch)
	g.Expect(err).NotTo(HaveOccurred())
	return b.Commit.ID
}

// readGiteaFile is name at the tip of branch of the fleet repository.
func readGiteaFile(g Gomega, api *giteasdk.Client, owner, branch, name string) string {
	content, _, err := api.GetFile(owner, fleetRepo, branch, name)
	g.Expect(err).NotTo(HaveOccurred())
	return string(content)
}
