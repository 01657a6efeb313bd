package e2e

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitea"
)

// TestReviewBranchOpensAPullRequestOnGitea runs examples/review-branch
// with its repository on a real Gitea (the host the example names): the
// commit lands on uprev/updates and the pull request the README describes
// is opened into main, with the Git Secret's token; main is untouched.
func TestReviewBranchOpensAPullRequestOnGitea(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const example = "review-branch"
	s := newScenario(t, "review-pr")
	srv := gitea.Start(t)
	image := s.reg.Image("acme/agent")
	s.reg.PushImage(t, "acme/agent", "1.4.1")
	digest := s.reg.PushImage(t, "acme/agent", "1.4.2")
	url := srv.CreateRepo(t, fleetRepo, "main", map[string]string{
		"clusters/prod/agent.yaml": agentDeployment(image, s.ns),
	})
	client := srv.Client(t)
	mainBranch, _, err := client.GetRepoBranch(srv.Admin, fleetRepo, "main")
	g.Expect(err).NotTo(HaveOccurred())
	s.rename("https://git.example.com/platform/fleet.git", url)
	s.rename("https://git.example.com", strings.TrimSuffix(srv.URL, "/"))
	s.rename("namespace: fleet\n", "namespace: "+s.ns+"\n")
	// The Secret the example names: Gitea takes an access token as the
	// password, and the pull request defaults to it.
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "fleet-git"},
		Data:       map[string][]byte{"username": []byte(srv.Admin), "password": []byte(srv.Token)},
	})
	createAgentPolicy(t, s.ns, image)
	auto := object[*uprevv1.UpdateAutomation](t, s.exampleObjects(example), "fleet")
	g.Expect(auto.Spec.Git.Push.PullRequest).NotTo(BeNil(), "the example opens a pull request")
	create(t, auto)

	var st uprevv1.UpdateAutomationStatus
	g.Eventually(func(g Gomega) {
		get(g, auto)
		st = auto.Status
		g.Expect(st.LastPushCommit).NotTo(BeEmpty())
		g.Expect(st.PullRequest).NotTo(BeNil())
		g.Expect(st.PullRequest.HeadCommit).To(Equal(st.LastPushCommit))
	}, 2*time.Minute).Should(Succeed())
	pushed, _, err := client.GetRepoBranch(srv.Admin, fleetRepo, "uprev/updates")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pushed.Commit.ID).To(Equal(st.LastPushCommit))

	pr, _, err := client.GetPullRequest(srv.Admin, fleetRepo, st.PullRequest.Number)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.PullRequest.URL).To(Equal(pr.HTMLURL))
	g.Expect(pr.Head.Ref).To(Equal("uprev/updates"))
	g.Expect(pr.Base.Ref).To(Equal("main"))
	g.Expect(pr.Title).To(Equal("chore(deps): Update agent to 1.4.2"))
	g.Expect(pr.Labels).To(ContainElement(HaveField("Name", "dependencies")))

	// The description is what the README shows, with this registry,
	// digest and namespace.
	readme := s.exampleFile(example, "README.md")
	_, block, found := strings.Cut(readme, "description lists the same change with its digest:\n\n```\n")
	g.Expect(found).To(BeTrue(), "the README shows a pull request description")
	block, _, _ = strings.Cut(block, "```")
	want := strings.NewReplacer("ghcr.io/acme/agent", image, "sha256:…", digest, "fleet/agent", s.ns+"/agent").Replace(strings.TrimSpace(block))
	g.Expect(pr.Body).To(HavePrefix(want + "\n"))

	mainNow, _, err := client.GetRepoBranch(srv.Admin, fleetRepo, "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mainNow.Commit.ID).To(Equal(mainBranch.Commit.ID), "main is left to the pull request")
}
