package controllers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestPullRequestOnGitHubAsGitHubApp: with the Secret of a GitHub App as
// its secretRef (the Git Secret too), the pull request is opened on
// GitHub's API with the app's installation token. An exhausted rate limit is
// PullRequestFailed, says so, and is retried once it resets, updating the
// same pull request; neither token nor key reaches status or events.
func TestPullRequestOnGitHubAsGitHubApp(t *testing.T) {
	g := NewWithT(t)
	app := githubapi.Start(t)
	gh := githubapi.StartRepository(t, "acme", "fleet", app.Token)
	f := pendingUpdate(t, gitserver.WithBasicAuth("x-access-token", app.Token))
	g.Expect(k8s.Create(context.Background(), secretWith(f.ns, "github-app", app.SecretData()))).To(Succeed())
	auto := newAutomation(t, f.ns, f.url, withSecret("github-app"), withPullRequest(uprevv1.PullRequestSpec{
		Provider: "github", URL: gh.URL, Repository: "acme/fleet", Labels: []string{"uprev"}, Reviewers: []string{"alice"},
		SecretRef: &meta.LocalObjectReference{Name: "github-app"},
	}))

	st := waitForPullRequest(t, auto, "")
	g.Expect(st.PullRequest).To(Equal(&uprevv1.PullRequestStatus{
		URL: "https://github.com/acme/fleet/pull/1", Number: 1, State: "open", HeadCommit: st.LastPushCommit,
	}))
	g.Expect(f.tip("uprev/updates")).To(Equal(st.LastPushCommit))
	prs := gh.PullRequests()
	g.Expect(prs).To(HaveLen(1))
	g.Expect(prs[0]).To(And(HaveField("Head", "uprev/updates"), HaveField("Base", "main"), HaveField("Title", "Update agent to 1.1.0"),
		HaveField("Labels", ConsistOf("uprev")), HaveField("RequestedReviewers", ConsistOf("alice"))))
	g.Expect(prs[0].Body).To(ContainSubstring("`apps/agent.yaml` (" + f.ns + "/agent): `" + f.image + ":1.0.0` --> `" + f.image + ":1.1.0`"))

	// The next push meets an exhausted rate limit.
	gh.RateLimit(2 * time.Second)
	f.pushTag("1.2.0")
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, auto)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.PullRequestFailedReason))
		g.Expect(c.Message).To(ContainSubstring("rate limited"))
	}).Should(Succeed())
	st = waitForPullRequest(t, auto, st.LastPushCommit)
	g.Expect(st.PullRequest.Number).To(BeEquivalentTo(1))
	prs = gh.PullRequests()
	g.Expect(prs).To(HaveLen(1))
	g.Expect(prs[0].Body).To(ContainSubstring("### Changes\n\n- "+f.ns+"/agent: `1.0.0` --> `1.2.0`\n"),
		"the retry states the pull request's moves as its commits' trailers do")
	waitForReady(t, auto)

	status, err := json.Marshal(getAutomation(g, auto).Status)
	g.Expect(err).NotTo(HaveOccurred())
	notes := strings.Join(eventNotes(automationEvents(g, f.ns, auto.Name)), "\n")
	for _, secret := range []string{app.Token, string(app.PrivateKeyPEM)} {
		g.Expect(string(status)).NotTo(ContainSubstring(secret))
		g.Expect(notes).NotTo(ContainSubstring(secret))
	}
}
