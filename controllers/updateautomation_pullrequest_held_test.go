package controllers

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestPullRequestBodyListsRejectionsWithTheirReason: a version rejected
// in Git (an Uprev-Reject commit, as `uprev reject` makes) is listed among
// the pull request's held versions with who made the commit, the commit
// and the reason; a hostile reason is inert there: it mentions nobody,
// references no issue, closes no block, opens no tag or link, and cannot
// pass for one of uprev's lines.
func TestPullRequestBodyListsRejectionsWithTheirReason(t *testing.T) {
	g := NewWithT(t)
	gh := githubapi.StartRepository(t, "acme", "fleet", "forge-token")
	f := newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{
		"apps/agent.yaml": withVersion(agentMarked, "1.0.0"),
		"apps/app.yaml":   strings.ReplaceAll(withVersion(agentMarked, "1.0.0"), "NS:agent", "NS:app"),
	})
	const hostile = "thanks @someone, see #12 </details> <b>bold</b> &#64;admin [Uprev-Update](https://evil.example) `x` " +
		"--- Opened by uprev for UpdateAutomation x"
	rejection := "Reject " + f.ns + "/agent 1.1.0\n\n" +
		guard.RejectTrailerKey + ": " + f.ns + "/agent 1.1.0\n" + guard.RejectReasonTrailerKey + ": " + hostile + "\n"
	rejected := f.git.CommitFile(t, fleetRepo, "main", "REJECTIONS", "agent 1.1.0\n", rejection)
	waitForLatestTag(t, newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0")), "1.1.0")
	waitForLatestTag(t, newPolicy(t, f.ns, "app", semverChoice(">=1.0.0")), "1.1.0")
	g.Expect(k8s.Create(context.Background(), secretWith(f.ns, "forge", map[string][]byte{"token": []byte("forge-token")}))).To(Succeed())
	auto := newAutomation(t, f.ns, f.url, withPullRequest(uprevv1.PullRequestSpec{
		Provider: "github", URL: gh.URL, Repository: "acme/fleet", SecretRef: &meta.LocalObjectReference{Name: "forge"},
	}))

	waitForPullRequest(t, auto, "")
	g.Expect(f.readFile("uprev/updates", "apps/agent.yaml")).To(Equal(f.expand(withVersion(agentMarked, "1.0.0"))), "the rejected version is not written")
	prs := gh.PullRequests()
	g.Expect(prs).To(HaveLen(1))
	body := prs[0].Body
	_, held, found := strings.Cut(body, "### Held versions\n")
	g.Expect(found).To(BeTrue(), body)
	held, _, _ = strings.Cut(held, "\n---\n")
	g.Expect(held).To(Equal("\nNot written because a person reverted or rejected them; `uprev release-hold`, or the annotation `uprev.dev/release-holds`, lifts a hold.\n\n" +
		"- " + f.ns + "/agent `1.1.0`, rejected by `" + gitserver.AuthorName + "` in " + rejected[:10] + ", reason: " +
		"`thanks @\u200bsomeone, see #\u200b12 &lt;/details> &lt;b>bold&lt;/b> &amp;#\u200b64;admin [Uprev-Update](https://evil.example) 'x' " +
		"--- Opened by uprev for UpdateAutomation x`\n"))
	g.Expect(strings.Count(body, "\n---\n")).To(Equal(1), "one footer")
	g.Expect(body).NotTo(ContainSubstring("</details>"))
	g.Expect(body).NotTo(ContainSubstring("@someone"))
}
