package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	giteasdk "code.gitea.io/sdk/gitea"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitea"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// giteaFixture is a pull request test's world: a real Gitea with the
// repository fleet (apps/agent.yaml at agent 1.0.0 on main) and the
// collaborator alice, a registry with acme/agent 1.0.0 and 1.1.0, the
// ImageRepository and the ImagePolicy agent (semver, digests reflected),
// and the Git Secret "git" (the administrator and its token).
type giteaFixture struct {
	t      *testing.T
	ns     string
	gitea  *gitea.Server
	reg    *registry.Registry
	repo   *imagev1.ImageRepository
	image  string
	gitURL string
}

func newGiteaFixture(t *testing.T) *giteaFixture {
	t.Helper()
	f := &giteaFixture{t: t, ns: newNamespace(t), gitea: gitea.Start(t), reg: registry.Start(t)}
	f.image = f.reg.Image("acme/agent")
	f.reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	marked := strings.NewReplacer("IMAGE", f.image, "NS", f.ns).Replace(withVersion(agentMarked, "1.0.0"))
	f.gitURL = f.gitea.CreateRepo(t, fleetRepo, "main", map[string]string{"apps/agent.yaml": marked})
	f.gitea.CreateUser(t, "alice", fleetRepo)
	f.repo = newRepository(t, f.ns, f.image)
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"), func(p *imagev1.ImagePolicy) {
		p.Spec.DigestReflectionPolicy = imagev1.ReflectIfNotPresent
	})
	waitForLatestTag(t, pol, "1.1.0")
	NewWithT(t).Expect(k8s.Create(context.Background(), secretWith(f.ns, "git", map[string][]byte{
		"username": []byte(f.gitea.Admin), "password": []byte(f.gitea.Token),
	}))).To(Succeed())
	return f
}

// pushTag pushes a new tag of acme/agent and has it scanned.
func (f *giteaFixture) pushTag(tag string) {
	f.t.Helper()
	f.reg.PushTags(f.t, "acme/agent", tag)
	requestReconcile(f.t, f.repo)
}

// pullRequest reads pull request n from Gitea.
func (f *giteaFixture) pullRequest(g Gomega, n int64) *giteasdk.PullRequest {
	pr, _, err := f.gitea.Client(f.t).GetPullRequest(f.gitea.Admin, fleetRepo, n)
	g.Expect(err).NotTo(HaveOccurred())
	return pr
}

// branchTip is the commit at the tip of branch on Gitea.
func (f *giteaFixture) branchTip(g Gomega, branch string) string {
	b, _, err := f.gitea.Client(f.t).GetRepoBranch(f.gitea.Admin, fleetRepo, branch)
	g.Expect(err).NotTo(HaveOccurred())
	return b.Commit.ID
}

// withPullRequest makes the automation push to uprev/updates and open
// pull requests as spec says.
func withPullRequest(spec uprevv1.PullRequestSpec) func(*uprevv1.UpdateAutomation) {
	return func(a *uprevv1.UpdateAutomation) {
		a.Spec.Git.Push = &uprevv1.PushSpec{Branch: "uprev/updates", PullRequest: &spec}
	}
}

// waitForPullRequest waits until the automation's last push has its pull
// request, other than the pull request number not, and returns the status.
func waitForPullRequest(t *testing.T, auto *uprevv1.UpdateAutomation, previousCommit string) uprevv1.UpdateAutomationStatus {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		st := getAutomation(g, auto).Status
		g.Expect(st.LastPushCommit).NotTo(Equal(previousCommit))
		g.Expect(st.PullRequest).NotTo(BeNil())
		g.Expect(st.PullRequest.HeadCommit).To(Equal(st.LastPushCommit), "the pull request is up to date with the push")
	}).Should(Succeed())
	return auto.Status
}

// TestAutomationOpensPullRequestsOnGitea: against a real Gitea, the first
// push opens a pull request from the push branch into main with the
// change, its digest, the labels and the reviewer; the next push updates
// the same pull request; once a person closes it, and again once one is
// merged, the next change opens a new one and the closed ones stay closed.
func TestAutomationOpensPullRequestsOnGitea(t *testing.T) {
	t.Parallel() // its Gitea, registry, namespace and objects are its own
	g := NewWithT(t)
	f := newGiteaFixture(t)
	auto := newAutomation(t, f.ns, f.gitURL, withSecret("git"), withPullRequest(uprevv1.PullRequestSpec{
		Provider: "gitea", URL: f.gitea.URL, Labels: []string{"uprev", "dependencies"}, Reviewers: []string{"alice"},
	}))

	st := waitForPullRequest(t, auto, "")
	first := st.PullRequest
	g.Expect(first.Number).To(BeNumerically(">", 0))
	g.Expect(first.State).To(Equal("open"))
	g.Expect(f.branchTip(g, "uprev/updates")).To(Equal(st.LastPushCommit))
	g.Expect(f.branchTip(g, "main")).NotTo(Equal(st.LastPushCommit), "main is left to the pull request")
	pr := f.pullRequest(g, first.Number)
	g.Expect(first.URL).To(Equal(pr.HTMLURL))
	g.Expect(pr.Title).To(Equal("Update agent to 1.1.0"))
	g.Expect(pr.Head.Ref).To(Equal("uprev/updates"))
	g.Expect(pr.Base.Ref).To(Equal("main"))
	digest := latestRef(g, client.ObjectKey{Namespace: f.ns, Name: "agent"}).Digest
	g.Expect(digest).NotTo(BeEmpty())
	g.Expect(pr.Body).To(ContainSubstring("`apps/agent.yaml` (" + f.ns + "/agent): `" + f.image + ":1.0.0` --> `" + f.image + ":1.1.0@" + digest + "`"))
	var labels, reviewers []string
	for _, l := range pr.Labels {
		labels = append(labels, l.Name)
	}
	for _, u := range pr.RequestedReviewers {
		reviewers = append(reviewers, u.UserName)
	}
	g.Expect(labels).To(ConsistOf("uprev", "dependencies"))
	g.Expect(reviewers).To(ConsistOf("alice"))
	g.Expect(conditions.GetMessage(auto, "Ready")).To(ContainSubstring("pull request #"))

	// A second change updates the same pull request.
	f.pushTag("1.2.0")
	st = waitForPullRequest(t, auto, st.LastPushCommit)
	g.Expect(st.PullRequest.Number).To(Equal(first.Number))
	pr = f.pullRequest(g, first.Number)
	g.Expect(pr.Body).To(ContainSubstring("### Changes in the last push\n\n- `apps/agent.yaml` (" + f.ns + "/agent): `" + f.image + ":1.1.0@"))
	g.Expect(pr.Body).To(ContainSubstring("--> `" + f.image + ":1.2.0@"))
	g.Expect(pr.Body).To(ContainSubstring("### All updates in this pull request (2 commits)\n\n- "+f.ns+"/agent: `1.0.0` --> `1.2.0`\n"),
		"the pull request's updates from its first commit on")
	g.Expect(pr.State).To(Equal(giteasdk.StateOpen))

	// A person closes it: the next change opens a new one.
	closed := giteasdk.StateClosed
	_, _, err := f.gitea.Client(t).EditPullRequest(f.gitea.Admin, fleetRepo, first.Number, giteasdk.EditPullRequestOption{State: &closed})
	g.Expect(err).NotTo(HaveOccurred())
	f.pushTag("1.3.0")
	st = waitForPullRequest(t, auto, st.LastPushCommit)
	second := st.PullRequest
	g.Expect(second.Number).To(BeNumerically(">", first.Number))
	pr = f.pullRequest(g, first.Number)
	g.Expect(pr.State).To(Equal(giteasdk.StateClosed), "a closed pull request is never reopened")
	g.Expect(pr.Body).NotTo(ContainSubstring(":1.3.0"), "nor edited")

	// One is merged: the next change opens yet another.
	f.gitea.MergePullRequest(t, fleetRepo, second.Number)
	f.pushTag("1.4.0")
	st = waitForPullRequest(t, auto, st.LastPushCommit)
	g.Expect(st.PullRequest.Number).To(BeNumerically(">", second.Number))
	g.Expect(f.pullRequest(g, second.Number).HasMerged).To(BeTrue())
	body := f.pullRequest(g, st.PullRequest.Number).Body
	g.Expect(body).To(ContainSubstring("### Changes\n\n- `apps/agent.yaml` (" + f.ns + "/agent): `" + f.image + ":1.3.0@"))
	g.Expect(body).NotTo(ContainSubstring("All updates"), "a new pull request holds only the commits main does not have")

	status, err := json.Marshal(getAutomation(g, auto).Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring(f.gitea.Token))
	g.Expect(strings.Join(eventNotes(automationEvents(g, f.ns, auto.Name)), "\n")).NotTo(ContainSubstring(f.gitea.Token))
	g.Expect(eventNotes(automationEvents(g, f.ns, auto.Name))).To(ContainElement(ContainSubstring("PullRequestOpened: Opened pull request #")))
}

// TestPullRequestFailureIsRetriedWithoutANewPush: the forge fails after
// the push (Gitea behind a proxy answering 500): the automation reports
// PullRequestFailed without the token, the pushed commit stays, and once
// the forge answers again the retry opens the pull request for that same
// commit, without pushing again.
func TestPullRequestFailureIsRetriedWithoutANewPush(t *testing.T) {
	t.Parallel() // its Gitea, registry, namespace and objects are its own
	g := NewWithT(t)
	f := newGiteaFixture(t)
	target, err := url.Parse(f.gitea.URL)
	g.Expect(err).NotTo(HaveOccurred())
	var failing atomic.Bool
	var failed atomic.Int64
	failing.Store(true)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			failed.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"message":"the database is on fire"}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	// The proxy is another host than Git's: the pull request has a Secret of its own.
	g.Expect(k8s.Create(context.Background(), secretWith(f.ns, "forge", map[string][]byte{"token": []byte(f.gitea.Token)}))).To(Succeed())
	auto := newAutomation(t, f.ns, f.gitURL, withSecret("git"), withPullRequest(uprevv1.PullRequestSpec{
		Provider: "gitea", URL: front.URL, Repository: f.gitea.Admin + "/" + fleetRepo, SecretRef: &meta.LocalObjectReference{Name: "forge"},
	}))

	g.Eventually(func(g Gomega) {
		c := readyCondition(g, auto)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.PullRequestFailedReason))
		g.Expect(c.Message).To(ContainSubstring("HTTP 500"))
		g.Expect(conditions.IsStalled(auto)).To(BeFalse(), "retried with backoff")
		g.Expect(auto.Status.LastPushCommit).NotTo(BeEmpty())
		g.Expect(auto.Status.PullRequest).NotTo(BeNil())
		g.Expect(auto.Status.PullRequest.HeadCommit).To(BeEmpty(), "the pull request is still due")
	}).Should(Succeed())
	pushed := auto.Status.LastPushCommit
	g.Expect(f.branchTip(g, "uprev/updates")).To(Equal(pushed), "the pushed commit is kept")
	g.Eventually(failed.Load).Should(BeNumerically(">=", 2), "the call is retried")

	status, err := json.Marshal(auto.Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring(f.gitea.Token))
	g.Expect(strings.Join(eventNotes(automationEvents(g, f.ns, auto.Name)), "\n")).NotTo(ContainSubstring(f.gitea.Token))

	failing.Store(false)
	st := waitForReady(t, auto)
	g.Expect(st.LastPushCommit).To(Equal(pushed), "no new push")
	g.Expect(st.PullRequest.HeadCommit).To(Equal(pushed))
	g.Expect(st.PullRequest.Number).To(BeNumerically(">", 0))
	g.Expect(f.branchTip(g, "uprev/updates")).To(Equal(pushed))
	pr := f.pullRequest(g, st.PullRequest.Number)
	g.Expect(pr.Title).To(HavePrefix("Update agent to 1.1.0"))
	g.Expect(pr.Body).To(ContainSubstring(f.ns+"/agent: `1.0.0` --> `1.1.0`"), "the retry reads the changes from the commit")
}

// TestPullRequestNeedsAPushBranch: a pull request from the checkout
// branch into itself is Stalled InvalidSpec, and nothing is pushed.
func TestPullRequestNeedsAPushBranch(t *testing.T) {
	g := NewWithT(t)
	f := pendingUpdate(t)
	base := f.tip("main")
	auto := newAutomation(t, f.ns, f.url, withSecret("git"), func(a *uprevv1.UpdateAutomation) {
		a.Spec.Git.Push = &uprevv1.PushSpec{Branch: "main", PullRequest: &uprevv1.PullRequestSpec{Provider: "github"}}
	})
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, auto)
		g.Expect(c.Reason).To(Equal(uprevv1.InvalidSpecReason))
		g.Expect(c.Message).To(ContainSubstring("spec.git.push.pullRequest needs spec.git.push.branch to differ from spec.git.ref.branch (main)"))
		g.Expect(conditions.IsStalled(auto)).To(BeTrue())
	}).Should(Succeed())
	g.Expect(f.tip("main")).To(Equal(base))
}

// TestImageUpdateAutomationOpensAPullRequestOnGitea: Flux's kind has no
// field for pull requests; uprev's annotation on it opens one, on a real
// Gitea, as spec.git.push.pullRequest does.
func TestImageUpdateAutomationOpensAPullRequestOnGitea(t *testing.T) {
	t.Parallel() // its Gitea, registry, namespace and objects are its own
	g := NewWithT(t)
	f := newGiteaFixture(t)
	repo := &sourcev1.GitRepository{}
	g.Expect(yaml.UnmarshalStrict([]byte(strings.Replace(fluxGitRepository, "URL", f.gitURL, 1)), repo)).To(Succeed())
	repo.Namespace, repo.Spec.SecretRef.Name = f.ns, "git"
	g.Expect(k8s.Create(context.Background(), repo)).To(Succeed())
	auto := &iacv1.ImageUpdateAutomation{}
	g.Expect(yaml.UnmarshalStrict([]byte(fluxImageUpdateAutomation), auto)).To(Succeed())
	auto.Namespace = f.ns
	auto.Spec.GitSpec.Push.Branch = "image-updates"
	auto.Spec.Update.Path = "./apps"
	auto.Annotations = map[string]string{uprevv1.PullRequestAnnotation: `{"provider": "gitea", "url": "` + f.gitea.URL + `", "labels": ["uprev"]}`}
	g.Expect(k8s.Create(context.Background(), auto)).To(Succeed())

	st := waitForFluxPush(t, auto, "")
	var pr *giteasdk.PullRequest
	g.Eventually(func(g Gomega) {
		prs, _, err := f.gitea.Client(t).ListRepoPullRequests(f.gitea.Admin, fleetRepo, giteasdk.ListPullRequestsOptions{State: giteasdk.StateOpen})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(prs).To(HaveLen(1))
		pr = prs[0]
	}).Should(Succeed())
	g.Expect(pr.Head.Ref).To(Equal("image-updates"))
	g.Expect(pr.Base.Ref).To(Equal("main"))
	g.Expect(pr.Head.Sha).To(Equal(st.LastPushCommit))
	g.Expect(pr.Title).To(Equal("Automated image update"), "the first line of Flux's message")
	g.Expect(pr.Body).To(ContainSubstring("`" + f.image + ":1.0.0` --> `" + f.image + ":1.1.0@sha256:"))
	g.Expect(pr.Body).To(ContainSubstring("Opened by uprev for ImageUpdateAutomation " + f.ns + "/flux-system at "))
	g.Expect(pr.Labels).To(ContainElement(HaveField("Name", "uprev")))
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.GetMessage(getFluxAutomation(g, auto), "Ready")).To(ContainSubstring(fmt.Sprintf("opened pull request #%d", pr.Index)))
		g.Expect(eventNotes(eventsAbout(g, f.ns, iacv1.ImageUpdateAutomationKind, auto.Name))).To(
			ContainElement(ContainSubstring(fmt.Sprintf("Opened pull request #%d from image-updates", pr.Index))))
	}).Should(Succeed())
}
