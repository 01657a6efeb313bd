package controllers

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

// TestAnUnsignedTagNeverReachesGit runs a ReleaseGate with spec.verify,
// an ImagePolicy and an UpdateAutomation against the in-process registry
// and the real Git server: an unsigned version, newest for a while, is in
// no commit, and the next signed version is written over it.
func TestAnUnsignedTagNeverReachesGit(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, nil, map[string]string{
		"apps/agent.yaml": "image: IMAGE:1.0.0 # {\"$imagepolicy\": \"NS:agent\"}\n",
	})
	key := signing.NewKey(t)
	key.SignTag(t, f.reg, "acme/agent", f.reg.PushImage(t, "acme/agent", "1.0.0"))
	keyGate(t, f.ns, key)
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"), prodStage)
	waitForLatestTag(t, pol, "1.0.0")
	auto := newAutomation(t, f.ns, f.url)
	waitForReady(t, auto)

	// 1.1.0 is pushed unsigned (by someone with push rights and no key).
	f.reg.PushImage(t, "acme/agent", "1.1.0")
	requestReconcile(t, f.repo)
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, pol)
		g.Expect(tag).To(Equal("1.0.0"))
		g.Expect(c.Message).To(ContainSubstring("1.1.0 refused: unsigned"))
	}).Should(Succeed())
	runAutomation(t, auto)
	g.Expect(f.log("main")).To(HaveLen(1), "nothing to write while the newest is unsigned")

	// 1.2.0 is signed by the release pipeline (cosign 3 layout).
	key.SignBundle(t, f.reg, "acme/agent", f.reg.PushImage(t, "acme/agent", "1.2.0"))
	requestReconcile(t, f.repo)
	sha := waitForPush(t, auto, "")
	g.Expect(f.readFile("main", "apps/agent.yaml")).To(Equal(f.expand("image: IMAGE:1.2.0 # {\"$imagepolicy\": \"NS:agent\"}\n")))
	g.Expect(f.tip("main")).To(Equal(sha))

	history := f.git.Git(t, fleetRepo, "log", "-p", "--all")
	g.Expect(history).To(ContainSubstring(":1.2.0"))
	g.Expect(strings.Contains(history, "1.1.0")).To(BeFalse(), "the unsigned 1.1.0 is in a commit:\n%s", history)
}
