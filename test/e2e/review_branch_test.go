package e2e

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestReviewBranchGetsTheCommitAReviewerReads runs
// examples/review-branch: the automation pushes to uprev/updates, with the
// message its README shows, and main is left alone for people to merge.
func TestReviewBranchGetsTheCommitAReviewerReads(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const example = "review-branch"
	s := newScenario(t, "review", gitserver.WithBasicAuth("uprev", "s3cret"))
	// The example's repository needs credentials: the Secret it names.
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "fleet-git"},
		Data:       map[string][]byte{"username": []byte("uprev"), "password": []byte("s3cret")},
	})
	image := s.reg.Image("acme/agent")
	s.reg.PushImage(t, "acme/agent", "1.4.1")
	digest := s.reg.PushImage(t, "acme/agent", "1.4.2")
	s.initRepo(map[string]string{
		"clusters/prod/agent.yaml": agentDeployment(image, s.ns),
	})
	initial := s.tip("main")
	s.rename("https://git.example.com/platform/fleet.git", s.url)
	s.rename("namespace: fleet\n", "namespace: "+s.ns+"\n")

	// The example holds the automation only; the policy it writes is the
	// agent's.
	createAgentPolicy(t, s.ns, image)
	objs := s.exampleObjects(example)
	auto := object[*uprevv1.UpdateAutomation](t, objs, "fleet")
	// This Git server is no forge: the example's pull request runs against
	// a real Gitea in TestReviewBranchOpensAPullRequestOnGitea.
	auto.Spec.Git.Push.PullRequest = nil
	create(t, auto)

	sha := waitForPush(t, auto, "")
	g.Expect(s.tip("uprev/updates")).To(Equal(sha))
	g.Expect(s.subjects("uprev/updates")).To(Equal([]string{"chore(deps): Update agent to 1.4.2", "Initial commit"}))
	g.Expect(s.changedFiles(sha)).To(Equal([]string{"clusters/prod/agent.yaml"}))
	g.Expect(s.readFile("uprev/updates", "clusters/prod/agent.yaml")).To(ContainSubstring("image: " + image + ":1.4.2@" + digest + " #"))

	// What a reviewer reads is what the README promises, with this
	// registry, digest and namespace.
	readme := s.exampleFile(example, "README.md")
	_, block, found := strings.Cut(readme, "A commit made by this automation reads:\n\n```\n")
	g.Expect(found).To(BeTrue(), "the README shows a commit message")
	block, _, _ = strings.Cut(block, "```")
	want := strings.NewReplacer("ghcr.io/acme/agent", image, "sha256:…", digest, "fleet/agent", s.ns+"/agent").Replace(strings.TrimSpace(block))
	g.Expect(s.message(sha)).To(Equal(want))

	// main is untouched: people merge the review branch.
	g.Expect(s.tip("main")).To(Equal(initial))
	g.Expect(s.subjects("main")).To(Equal([]string{"Initial commit"}))
	st := runAutomation(t, auto)
	g.Expect(st.LastPushCommit).To(Equal(sha))
	g.Expect(s.tip("uprev/updates")).To(Equal(sha), "nothing new, no commit")
	g.Expect(s.tip("main")).To(Equal(initial))
}
