package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// fleetRepo is the name of the Git repository of the automation tests.
const fleetRepo = "fleet"

// Identity the automations of the tests commit as.
const (
	botName  = "uprev-bot"
	botEmail = "bot@uprev.example"
)

// automationFixture is what one automation test runs against: its own
// namespace, registry with the image acme/agent, ImageRepository "repo" and
// Git server with the repository fleetRepo.
type automationFixture struct {
	t     *testing.T
	ns    string
	reg   *registry.Registry
	git   *gitserver.Server
	image string
	repo  *imagev1.ImageRepository
	url   string
}

// newAutomationFixture pushes tags of acme/agent, creates the
// ImageRepository and the Git repository with files on branch main. In file
// contents IMAGE stands for the image name and NS for the namespace.
func newAutomationFixture(t *testing.T, tags []string, files map[string]string, gitOpts ...gitserver.Option) *automationFixture {
	t.Helper()
	f := &automationFixture{t: t, ns: newNamespace(t), reg: registry.Start(t), git: gitserver.Start(t, gitOpts...)}
	f.image = f.reg.Image("acme/agent")
	f.reg.PushTags(t, "acme/agent", tags...)
	f.repo = newRepository(t, f.ns, f.image)
	expanded := make(map[string]string, len(files))
	for p, content := range files {
		expanded[p] = f.expand(content)
	}
	f.url = f.git.InitRepo(t, fleetRepo, "main", expanded)
	return f
}

// expand replaces IMAGE and NS in s.
func (f *automationFixture) expand(s string) string {
	return strings.NewReplacer("IMAGE", f.image, "NS", f.ns).Replace(s)
}

// pushTag pushes a new tag of acme/agent and asks the ImageRepository to
// scan again, as a registry webhook would.
func (f *automationFixture) pushTag(tag string) {
	f.t.Helper()
	f.reg.PushTags(f.t, "acme/agent", tag)
	requestReconcile(f.t, f.repo)
}

// readFile returns path at the tip of branch.
func (f *automationFixture) readFile(branch, path string) string {
	f.t.Helper()
	return f.git.ReadFile(f.t, fleetRepo, branch, path)
}

// log returns the history of branch, newest first.
func (f *automationFixture) log(branch string) []gitserver.Commit {
	f.t.Helper()
	return f.git.Log(f.t, fleetRepo, branch)
}

// tip returns the SHA of the tip of branch.
func (f *automationFixture) tip(branch string) string {
	f.t.Helper()
	return f.git.Git(f.t, fleetRepo, "rev-parse", "refs/heads/"+branch)
}

// newAutomation creates the UpdateAutomation "fleet" writing to url's
// branch main every hour, so that only policy changes and the test's
// requests make it run.
func newAutomation(t testing.TB, ns, url string, mutate ...func(*uprevv1.UpdateAutomation)) *uprevv1.UpdateAutomation {
	t.Helper()
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: botName, Email: botEmail}},
			},
		},
	}
	for _, m := range mutate {
		m(auto)
	}
	if err := k8s.Create(context.Background(), auto); err != nil {
		t.Fatalf("creating UpdateAutomation: %v", err)
	}
	return auto
}

// withSecret makes the automation authenticate with the Secret name.
func withSecret(name string) func(*uprevv1.UpdateAutomation) {
	return func(a *uprevv1.UpdateAutomation) { a.Spec.Git.SecretRef = &meta.LocalObjectReference{Name: name} }
}

// withPushBranch makes the automation push to branch.
func withPushBranch(branch string) func(*uprevv1.UpdateAutomation) {
	return func(a *uprevv1.UpdateAutomation) { a.Spec.Git.Push = &uprevv1.PushSpec{Branch: branch} }
}

// getAutomation reads auto afresh.
func getAutomation(g Gomega, auto *uprevv1.UpdateAutomation) *uprevv1.UpdateAutomation {
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(auto), auto)).To(Succeed())
	return auto
}

// waitForReady waits until auto's current generation ran successfully and
// returns its status.
func waitForReady(t testing.TB, auto *uprevv1.UpdateAutomation) uprevv1.UpdateAutomationStatus {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		getAutomation(g, auto)
		g.Expect(auto.Status.ObservedGeneration).To(Equal(auto.Generation))
		c := conditions.Get(auto, meta.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Ready: %s: %s", c.Reason, c.Message)
	}).Should(Succeed())
	return auto.Status
}

// runAutomation asks for a run the way `flux reconcile` does and waits
// until the controller has handled that request; it returns the status the
// run left.
func runAutomation(t testing.TB, auto *uprevv1.UpdateAutomation) uprevv1.UpdateAutomationStatus {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	token := time.Now().Format(time.RFC3339Nano)
	g.Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(auto), auto); err != nil {
			return err
		}
		ann := auto.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[meta.ReconcileRequestAnnotation] = token
		auto.SetAnnotations(ann)
		return k8s.Update(ctx, auto)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getAutomation(g, auto).Status.LastHandledReconcileAt).To(Equal(token))
	}).Should(Succeed())
	return auto.Status
}

// waitForPush waits until auto reports a pushed commit other than previous
// and returns it.
func waitForPush(t testing.TB, auto *uprevv1.UpdateAutomation, previous string) string {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		commit := getAutomation(g, auto).Status.LastPushCommit
		g.Expect(commit).NotTo(BeEmpty())
		g.Expect(commit).NotTo(Equal(previous))
	}).Should(Succeed())
	return auto.Status.LastPushCommit
}

// waitForLatestTag waits until the policy selects tag.
func waitForLatestTag(t testing.TB, pol *imagev1.ImagePolicy, tag string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal(tag))
	}).Should(Succeed())
}

// updateAutomation changes auto's spec or metadata with mutate, retrying on
// conflicts.
func updateAutomation(t testing.TB, auto *uprevv1.UpdateAutomation, mutate func(*uprevv1.UpdateAutomation)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(auto), auto); err != nil {
			return err
		}
		mutate(auto)
		return k8s.Update(context.Background(), auto)
	}).Should(Succeed())
}

// automationEvents returns the events recorded about the UpdateAutomation
// name.
func automationEvents(g Gomega, ns, name string) []eventsv1.Event {
	return eventsAbout(g, ns, uprevv1.UpdateAutomationKind, name)
}

// eventsAbout returns the events recorded about the object of kind name.
func eventsAbout(g Gomega, ns, kind, name string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var events []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Regarding.Kind == kind {
			events = append(events, e)
		}
	}
	return events
}

// eventNotes returns "type reason: note" of events, for matchers.
func eventNotes(events []eventsv1.Event) []string {
	notes := make([]string, 0, len(events))
	for _, e := range events {
		notes = append(notes, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Note))
	}
	return notes
}

// commitField formats the tip of branch in the fleet repository with a git
// log format, such as %an or %B.
func (f *automationFixture) commitField(rev, format string) string {
	f.t.Helper()
	return f.git.Git(f.t, fleetRepo, "log", "-1", "--format="+format, rev)
}

// agentDeployment is a file with a bare marker among comments, blank lines,
// flow and block scalars that the rewrite must keep byte for byte.
const agentDeployment = `# The agent, kept current by uprev.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: agent   # name stays
  labels: {app: agent, "tier": 'system'}
spec:
  template:
    spec:
      containers:
        - name: agent
          image: IMAGE:1.0.0 # {"$imagepolicy": "NS:agent"}

          args: ["--log-level", 'debug']
          env:
            - name: NOTE
              value: |
                IMAGE:1.0.0 stays in this block scalar,
                  indented as it was.
---
# second document
apiVersion: v1
kind: ConfigMap
metadata: {name: agent-config}
data:
  version: "1.0.0"
`

// agentValues splits the reference into Helm-style name and tag fields.
const agentValues = `agent:
  image:
    repository: IMAGE # {"$imagepolicy": "NS:agent:name"}
    tag: "1.0.0" # {"$imagepolicy": "NS:agent:tag"}
    pullPolicy: IfNotPresent
`

func TestAutomationPushesOneCommitForAPolicyChange(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{
		"clusters/prod/agent.yaml":  agentDeployment,
		"clusters/prod/values.yaml": agentValues,
		"clusters/prod/plain.yaml":  "image: IMAGE:1.0.0\n",
		"outside/agent.yaml":        "image: IMAGE:1.0.0 # {\"$imagepolicy\": \"NS:agent\"}\n",
		"README.md":                 "# fleet\n",
	})
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.0.0")
	mainTip := f.tip("main")

	auto := newAutomation(t, f.ns, f.url, withPushBranch("uprev/updates"), func(a *uprevv1.UpdateAutomation) {
		a.Spec.Update.Path = "./clusters"
	})
	st := waitForReady(t, auto)
	g.Expect(st.LastPushCommit).To(BeEmpty(), "Git holds what the policy selects")
	g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(ContainSubstring("no change"))
	g.Expect(f.git.Git(t, fleetRepo, "branch", "--list", "uprev/updates")).To(BeEmpty(), "no push branch without a commit")

	f.pushTag("1.1.0")
	sha := waitForPush(t, auto, "")

	// Exactly one commit, on the push branch, on top of main; main untouched.
	g.Expect(f.tip("main")).To(Equal(mainTip))
	commits := f.log("uprev/updates")
	g.Expect(commits).To(HaveLen(2))
	g.Expect(commits[0].SHA).To(Equal(sha), "status.lastPushCommit is the branch tip")
	g.Expect(commits[0].Parents).To(Equal([]string{mainTip}))
	g.Expect(f.commitField(sha, "%an <%ae>|%cn <%ce>")).To(Equal(botName + " <" + botEmail + ">|" + botName + " <" + botEmail + ">"))

	wantMessage := f.expand(`Update agent to 1.1.0

clusters/prod/agent.yaml: IMAGE:1.0.0 --> IMAGE:1.1.0
clusters/prod/values.yaml: 1.0.0 --> 1.1.0

Uprev-Update: NS/agent 1.0.0 --> 1.1.0`)
	g.Expect(f.commitField(sha, "%B")).To(Equal(wantMessage))
	g.Expect(f.commitField(sha, "%(trailers:key=Uprev-Update,valueonly)")).To(Equal(f.ns+"/agent 1.0.0 --> 1.1.0"),
		"git reads the update as a trailer")
	g.Expect(strings.Fields(f.git.Git(t, fleetRepo, "diff", "--name-only", mainTip, sha))).To(
		ConsistOf("clusters/prod/agent.yaml", "clusters/prod/values.yaml"))

	// Whole files: only the marked values changed.
	wantDeployment := strings.Replace(agentDeployment, "IMAGE:1.0.0 #", "IMAGE:1.1.0 #", 1)
	g.Expect(f.readFile("uprev/updates", "clusters/prod/agent.yaml")).To(Equal(f.expand(wantDeployment)))
	g.Expect(f.readFile("uprev/updates", "clusters/prod/values.yaml")).To(Equal(f.expand(strings.Replace(agentValues, `"1.0.0"`, `"1.1.0"`, 1))))
	g.Expect(f.readFile("uprev/updates", "clusters/prod/plain.yaml")).To(Equal(f.expand("image: IMAGE:1.0.0\n")), "no marker, no rewrite")
	g.Expect(f.readFile("uprev/updates", "outside/agent.yaml")).To(ContainSubstring(":1.0.0 #"), "outside spec.update.path")

	g.Eventually(func(g Gomega) {
		getAutomation(g, auto)
		g.Expect(auto.Status.LastPushTime).NotTo(BeNil())
		g.Expect(auto.Status.ObservedPolicies).To(Equal(map[string]uprevv1.ImageRef{"agent": {Name: f.image, Tag: "1.1.0"}}))
		g.Expect(conditions.IsReady(auto)).To(BeTrue())
		g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(ContainSubstring("pushed " + sha[:10] + " to uprev/updates"))
		g.Expect(eventNotes(automationEvents(g, f.ns, auto.Name))).To(ContainElement(
			"Normal Pushed: Pushed commit " + sha[:10] + " to uprev/updates: Update agent to 1.1.0"))
	}).Should(Succeed())

	// A run with nothing new makes no commit and keeps the last push.
	for range 2 {
		st = runAutomation(t, auto)
		g.Expect(st.LastPushCommit).To(Equal(sha))
		g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(HavePrefix("no change"))
	}
	g.Expect(f.log("uprev/updates")).To(HaveLen(2))
	g.Expect(f.tip("main")).To(Equal(mainTip))
	pushed := 0
	for _, e := range automationEvents(g, f.ns, auto.Name) {
		if e.Reason == "Pushed" {
			pushed++
		}
	}
	g.Expect(pushed).To(Equal(1))
}

func TestAutomationRunsWhenAPolicyChanges(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{
		"apps/agent.yaml": "image: IMAGE:1.0.0 # {\"$imagepolicy\": \"NS:agent\"}\n",
	})
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.0.0")
	auto := newAutomation(t, f.ns, f.url)
	waitForReady(t, auto)

	var last string
	for _, tag := range []string{"1.1.0", "1.2.0"} {
		f.pushTag(tag)
		last = waitForPush(t, auto, last)
		g.Expect(f.readFile("main", "apps/agent.yaml")).To(Equal(f.expand("image: IMAGE:" + tag + " # {\"$imagepolicy\": \"NS:agent\"}\n")))
		g.Expect(f.tip("main")).To(Equal(last))
	}
	getAutomation(g, auto)
	g.Expect(auto.Annotations).NotTo(HaveKey(meta.ReconcileRequestAnnotation), "no run was requested")
	g.Expect(auto.Status.LastHandledReconcileAt).To(BeEmpty())
	g.Expect(auto.Spec.Interval.Duration).To(Equal(time.Hour))
	g.Expect(f.log("main")).To(HaveLen(3))

	// A policy the automation does not select does not make it run.
	newPolicy(t, f.ns, "other", semverChoice(">=1.0.0"), func(p *imagev1.ImagePolicy) {
		p.Labels = map[string]string{"team": "other"}
	})
	updateAutomation(t, auto, func(a *uprevv1.UpdateAutomation) {
		a.Spec.PolicySelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpDoesNotExist},
		}}
	})
	waitForReady(t, auto)
	g.Expect(auto.Status.ObservedPolicies).To(HaveLen(1))
	g.Expect(auto.Status.ObservedPolicies).To(HaveKey("agent"))
}

func TestOnePolicyFromSeveralVersionsIsOneUpdate(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"0.9.0", "1.0.0", "1.1.0"}, map[string]string{
		"apps/a.yaml": "image: IMAGE:1.0.0 # {\"$imagepolicy\": \"NS:agent\"}\n",
		"apps/b.yaml": "image: IMAGE:0.9.0 # {\"$imagepolicy\": \"NS:agent\"}\n",
	})
	waitForLatestTag(t, newPolicy(t, f.ns, "agent", semverChoice(">=0.1.0")), "1.1.0")
	auto := newAutomation(t, f.ns, f.url)
	sha := waitForPush(t, auto, "")
	g.Expect(f.commitField(sha, "%B")).To(Equal(f.expand(`Update agent to 1.1.0

apps/a.yaml: IMAGE:1.0.0 --> IMAGE:1.1.0
apps/b.yaml: IMAGE:0.9.0 --> IMAGE:1.1.0

Uprev-Update: NS/agent 0.9.0 --> 1.1.0
Uprev-Update: NS/agent 1.0.0 --> 1.1.0`)))
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(automationEvents(g, f.ns, auto.Name))).To(ContainElement(
			"Normal Pushed: Pushed commit " + sha[:10] + " to main: Update agent to 1.1.0"))
	}).Should(Succeed())
}

// secretWith returns a Secret of the namespace with data.
func secretWith(ns, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}
