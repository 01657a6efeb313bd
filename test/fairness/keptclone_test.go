package fairness

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// TestKeptCloneInUseHoldsNoWorker: an automation whose push hangs keeps its
// kept clone; a second automation of the same repository and branch finds
// the clone in use. It must give its worker and its share of the Git
// server back at once, not wait in them: another namespace's automation on
// the same Git server is Ready within 5 s, and the second automation runs
// as soon as the first gives the clone back.
func TestKeptCloneInUseHoldsNoWorker(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	startManager(t)
	gate := make(chan struct{})
	release := func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}
	pushed := make(chan string, 8)
	git := gitserver.Start(t, gitserver.WithPushGate(gate), gitserver.WithAfterPush(func(repo string) { pushed <- repo }))
	// Registered after the server's own cleanup, so run before it: the
	// hung push ends before the server waits for its connections to close.
	t.Cleanup(release)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")

	// Two automations of one repository and branch, in one namespace,
	// both to write the policy's 1.1.0: the first to push holds the clone.
	ns := newNamespace(t, "kept-clone")
	makePolicy(t, g, ns, reg)
	url := git.InitRepo(t, "shared", "main", map[string]string{
		"deploy/agent.yaml": fmt.Sprintf("image: %s:1.0.0 # {\"$imagepolicy\": \"%s:agent\"}\n", reg.Image("acme/agent"), ns),
	})
	timeout := &metav1.Duration{Duration: time.Minute}
	first := newAutomation(ns, "first", url)
	first.Spec.Git.Timeout = timeout
	create(t, first)
	g.Eventually(func() bool {
		return git.Counts().ReceivePack > 0
	}, 30*time.Second, 25*time.Millisecond).Should(BeTrue(), "the first automation's push reached the server")
	second := newAutomation(ns, "second", url)
	second.Spec.Git.Timeout = timeout
	create(t, second)

	// Another namespace's automation on the same Git server, with nothing
	// to write (so no push the gate would hold).
	other := newNamespace(t, "kept-clone-other")
	otherURL := git.InitRepo(t, "other", "main", map[string]string{"README.md": "nothing marked\n"})
	start := time.Now()
	auto := newAutomation(other, "apps", otherURL)
	auto.Spec.Git.Timeout = timeout
	create(t, auto)
	g.Eventually(readyCondition(auto, func() []metav1.Condition { return auto.Status.Conditions }), 5*time.Second).
		WithPolling(25*time.Millisecond).Should(HaveField("Status", metav1.ConditionTrue), "another namespace's automation on the same Git server")
	t.Logf("another namespace's automation was Ready %s after it was made, while a push held a kept clone", time.Since(start).Round(time.Millisecond))
	if c := readyCondition(second, func() []metav1.Condition { return second.Status.Conditions })(g); c != nil {
		g.Expect(c.Status).NotTo(Equal(metav1.ConditionTrue), "the second automation waits for the clone: %s", c.Message)
	}

	// The push goes through; the second automation is woken and finds
	// the version written.
	release()
	g.Eventually(pushed, 10*time.Second).Should(Receive(Equal("shared")))
	start = time.Now()
	g.Eventually(readyCondition(second, func() []metav1.Condition { return second.Status.Conditions }), 5*time.Second).
		WithPolling(25*time.Millisecond).Should(HaveField("Status", metav1.ConditionTrue), "the second automation, once the clone is free")
	t.Logf("the second automation was Ready %s after the clone was given back", time.Since(start).Round(time.Millisecond))
	g.Expect(git.ReadFile(t, "shared", "main", "deploy/agent.yaml")).To(ContainSubstring(":1.1.0"))
}
