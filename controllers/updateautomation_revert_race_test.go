package controllers

import (
	"path"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// appMarked is app.yaml at a version.
const appMarked = "image: IMAGE:VERSION # {\"$imagepolicy\": \"NS:app\"}\n"

// revertRace is a repository with agent.yaml and app.yaml at 1.0.0 in dir,
// where a person reverts a commit on main just before the automation's
// next push lands, so that the push is rejected and retried on the revert.
type revertRace struct {
	*automationFixture
	dir string
	// armed carries the commit to revert before the next push; reverted,
	// the revert.
	armed, reverted chan string
}

func newRevertRace(t *testing.T, dir string, gitOpts ...gitserver.Option) *revertRace {
	t.Helper()
	r := &revertRace{dir: dir, armed: make(chan string, 1), reverted: make(chan string, 1)}
	hook := gitserver.WithBeforePush(func(repo string) {
		select {
		case update := <-r.armed:
			r.reverted <- r.git.Revert(t, repo, "main", update)
		default:
		}
	})
	r.automationFixture = newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{
		path.Join(dir, "agent.yaml"): withVersion(agentMarked, "1.0.0"),
		path.Join(dir, "app.yaml"):   withVersion(appMarked, "1.0.0"),
	}, append(gitOpts, hook)...)
	waitForLatestTag(t, newPolicy(t, r.ns, "agent", semverChoice(">=1.0.0")), "1.1.0")
	return r
}

// race reverts update, uprev's commit of agent 1.1.0, just as the
// automation pushes its next commit, an update of app that waitForPush
// waits for, and checks that the commit pushed is built on the revert and
// leaves agent at 1.0.0. It returns the revert and the commit pushed.
func (r *revertRace) race(t *testing.T, update string, waitForPush func(previous string) string) (revert, sha string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(r.readFile("main", path.Join(r.dir, "agent.yaml"))).To(Equal(r.expand(withVersion(agentMarked, "1.1.0"))))
	r.armed <- update
	waitForLatestTag(t, newPolicy(t, r.ns, "app", semverChoice(">=1.0.0")), "1.1.0")
	g.Eventually(r.reverted).Should(Receive(&revert))
	sha = waitForPush(update)

	g.Expect(r.readFile("main", path.Join(r.dir, "agent.yaml"))).To(Equal(r.expand(withVersion(agentMarked, "1.0.0"))), "the revert is not undone")
	g.Expect(r.readFile("main", path.Join(r.dir, "app.yaml"))).To(Equal(r.expand(withVersion(appMarked, "1.1.0"))))
	log := r.log("main")
	g.Expect(log[0].SHA).To(Equal(sha))
	g.Expect(log[0].Parents).To(Equal([]string{revert}), "the retry is built on the revert, and nothing follows")
	g.Expect(log[2].SHA).To(Equal(update))
	g.Expect(r.commitField(sha, "%(trailers:key=Uprev-Update,valueonly)")).To(Equal(r.ns + "/app 1.0.0 --> 1.1.0"))
	return revert, sha
}

func TestRevertPushedDuringAPushRaceIsHeld(t *testing.T) {
	g := NewWithT(t)
	r := newRevertRace(t, "apps")
	auto := newAutomation(t, r.ns, r.url)
	update := waitForPush(t, auto, "")

	revert, sha := r.race(t, update, func(previous string) string { return waitForPush(t, auto, previous) })
	g.Expect(subjects(r.log("main"))).To(Equal([]string{"Update app to 1.1.0", `Revert "Update agent to 1.1.0"`, "Update agent to 1.1.0", "Initial commit"}))
	g.Eventually(func(g Gomega) {
		st := getAutomation(g, auto).Status
		g.Expect(st.LastPushCommit).To(Equal(sha))
		g.Expect(st.Holds).To(Equal([]uprevv1.Hold{{Policy: r.ns + "/agent", Version: "1.1.0", RevertedIn: revert}}))
	}).Should(Succeed())
}

func TestRevertPushedDuringAPushRaceIsHeldForFlux(t *testing.T) {
	g := NewWithT(t)
	r := newRevertRace(t, "clusters/my-cluster", gitserver.WithBasicAuth("flux", "s3cret"))
	r.fluxSource()
	auto := r.fluxAutomation()
	update := waitForFluxPush(t, auto, "").LastPushCommit

	r.race(t, update, func(previous string) string { return waitForFluxPush(t, auto, previous).LastPushCommit })
	g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(HaveSuffix("1 held"))
}

// subjects returns the subjects of commits, newest first.
func subjects(commits []gitserver.Commit) []string {
	var s []string
	for _, c := range commits {
		s = append(s, c.Subject)
	}
	return s
}
