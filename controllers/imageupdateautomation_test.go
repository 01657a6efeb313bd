package controllers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// fluxGitRepository is a GitRepository as Flux's docs write it
// (fluxcd.io/flux/components/source/gitrepositories), URL and Secret
// aside: URL stands for the test Git server's.
const fluxGitRepository = `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
spec:
  interval: 1m0s
  ref:
    branch: main
  secretRef:
    name: flux-system
  url: URL
`

// fluxImageUpdateAutomation is the ImageUpdateAutomation of Flux's image
// automation guide (fluxcd.io/flux/guides/image-update), with the message
// template of its reference docs.
const fluxImageUpdateAutomation = `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageUpdateAutomation
metadata:
  name: flux-system
spec:
  interval: 30m
  sourceRef:
    kind: GitRepository
    name: flux-system
  git:
    checkout:
      ref:
        branch: main
    commit:
      author:
        email: fluxcdbot@users.noreply.github.com
        name: fluxcdbot
      messageTemplate: |
        Automated image update

        Automation name: {{ .AutomationObject }}

        Files:
        {{ range $filename, $_ := .Changed.FileChanges -}}
        - {{ $filename }}
        {{ end -}}

        Objects:
        {{ range $resource, $changes := .Changed.Objects -}}
        - {{ $resource.Kind }} {{ $resource.Name }}
          Changes:
        {{- range $_, $change := $changes }}
            - {{ $change.OldValue }} -> {{ $change.NewValue }}
        {{ end -}}
        {{ end -}}
    push:
      branch: main
  update:
    path: ./clusters/my-cluster
    strategy: Setters
`

// fluxSource creates the GitRepository of Flux's docs in f's namespace,
// reading f's repository with basic auth, changed by mutate.
func (f *automationFixture) fluxSource(mutate ...func(*sourcev1.GitRepository)) {
	f.t.Helper()
	g := NewWithT(f.t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "flux-system"},
		StringData: map[string]string{"username": "flux", "password": "s3cret"},
	})).To(Succeed())
	repo := &sourcev1.GitRepository{}
	g.Expect(yaml.UnmarshalStrict([]byte(strings.Replace(fluxGitRepository, "URL", f.url, 1)), repo)).To(Succeed())
	repo.Namespace = f.ns
	for _, m := range mutate {
		m(repo)
	}
	g.Expect(k8s.Create(ctx, repo)).To(Succeed())
}

// fluxAutomation creates the ImageUpdateAutomation of Flux's docs in f's
// namespace, changed by mutate.
func (f *automationFixture) fluxAutomation(mutate ...func(*iacv1.ImageUpdateAutomation)) *iacv1.ImageUpdateAutomation {
	f.t.Helper()
	g := NewWithT(f.t)
	ctx := context.Background()
	auto := &iacv1.ImageUpdateAutomation{}
	g.Expect(yaml.UnmarshalStrict([]byte(fluxImageUpdateAutomation), auto)).To(Succeed())
	auto.Namespace = f.ns
	for _, m := range mutate {
		m(auto)
	}
	g.Expect(k8s.Create(ctx, auto)).To(Succeed())
	return auto
}

// getFluxAutomation reads auto afresh.
func getFluxAutomation(g Gomega, auto *iacv1.ImageUpdateAutomation) *iacv1.ImageUpdateAutomation {
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(auto), auto)).To(Succeed())
	return auto
}

// waitForFluxPush waits until auto reports a pushed commit other than
// previous and returns its status.
func waitForFluxPush(t *testing.T, auto *iacv1.ImageUpdateAutomation, previous string) iacv1.ImageUpdateAutomationStatus {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		commit := getFluxAutomation(g, auto).Status.LastPushCommit
		g.Expect(commit).NotTo(BeEmpty())
		g.Expect(commit).NotTo(Equal(previous))
		g.Expect(conditions.IsReady(auto)).To(BeTrue(), conditions.GetMessage(auto, meta.ReadyCondition))
	}).Should(Succeed())
	return auto.Status
}

// requestFluxRun asks for a run as `flux reconcile image update` does and
// waits until it was handled; it returns the status it left.
func requestFluxRun(t *testing.T, auto *iacv1.ImageUpdateAutomation) iacv1.ImageUpdateAutomationStatus {
	t.Helper()
	requestReconcile(t, auto)
	token := auto.Annotations[meta.ReconcileRequestAnnotation]
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(getFluxAutomation(g, auto).Status.LastHandledReconcileAt).To(Equal(token))
	}).Should(Succeed())
	return auto.Status
}

func TestImageUpdateAutomationWritesWhatFluxWrites(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{
		"clusters/my-cluster/agent.yaml": agentDeployment,
		"clusters/other/agent.yaml":      agentDeployment,
	}, gitserver.WithBasicAuth("flux", "s3cret"))
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.0.0")
	f.fluxSource()
	auto := f.fluxAutomation()

	// Nothing to write: Ready, a run time, the observations, no push.
	g.Eventually(func(g Gomega) {
		getFluxAutomation(g, auto)
		g.Expect(conditions.IsReady(auto)).To(BeTrue(), conditions.GetMessage(auto, meta.ReadyCondition))
		g.Expect(auto.Status.ObservedGeneration).To(Equal(auto.Generation))
	}).Should(Succeed())
	g.Expect(auto.Finalizers).To(ContainElement(iacv1.ImageUpdateAutomationFinalizer))
	g.Expect(auto.Status.LastAutomationRunTime).NotTo(BeNil())
	g.Expect(auto.Status.LastPushCommit).To(BeEmpty())
	g.Expect(auto.Status.ObservedSourceRevision).To(Equal("main@sha1:" + f.tip("main")))
	g.Expect(auto.Status.ObservedPolicies).To(Equal(iacv1.ObservedPolicies{"agent": {Name: f.image, Tag: "1.0.0"}}))

	f.pushTag("1.1.0")
	st := waitForFluxPush(t, auto, "")
	g.Expect(f.tip("main")).To(Equal(st.LastPushCommit))
	g.Expect(st.LastPushTime).NotTo(BeNil())
	g.Expect(st.ObservedSourceRevision).To(Equal("main@sha1:" + st.LastPushCommit))
	g.Expect(st.ObservedPolicies).To(Equal(iacv1.ObservedPolicies{"agent": {Name: f.image, Tag: "1.1.0"}}))

	// Flux's message, as its template writes it, then uprev's trailer.
	want := "Automated image update\n\nAutomation name: " + f.ns + "/flux-system\n\n" +
		"Files:\n- agent.yaml\nObjects:\n- Deployment agent\n  Changes:\n" +
		"    - " + f.image + ":1.0.0 -> " + f.image + ":1.1.0\n"
	g.Expect(f.commitField(st.LastPushCommit, "%B")).To(Equal(want + "\nUprev-Update: " + f.ns + "/agent 1.0.0 --> 1.1.0"))
	g.Expect(f.commitField(st.LastPushCommit, "%an <%ae>")).To(Equal("fluxcdbot <fluxcdbot@users.noreply.github.com>"))
	// Only the marked line of the file under update.path changed.
	g.Expect(f.readFile("main", "clusters/my-cluster/agent.yaml")).To(Equal(
		f.expand(strings.Replace(agentDeployment, "IMAGE:1.0.0 # {", "IMAGE:1.1.0 # {", 1))))
	g.Expect(f.readFile("main", "clusters/other/agent.yaml")).To(Equal(f.expand(agentDeployment)))
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(eventsAbout(g, f.ns, iacv1.ImageUpdateAutomationKind, auto.Name))).To(ContainElement(HavePrefix("Normal Pushed: Pushed commit " + shortSHA(st.LastPushCommit))))
	}).Should(Succeed())
	// Flux's Alerts get it, with the commit where Flux's Git commit status
	// providers read it.
	g.Eventually(func() []eventv1.Event {
		return notificationController.about(iacv1.ImageUpdateAutomationKind, auto)
	}).Should(ContainElement(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{
		"Reason": Equal("Pushed"),
		"Metadata": Equal(map[string]string{
			"image.toolkit.fluxcd.io/commit":   st.LastPushCommit,
			"image.toolkit.fluxcd.io/revision": "main@sha1:" + st.LastPushCommit,
		}),
	})))

	// A person reverts it: the revert stays, and the Ready message says so.
	revert := f.git.Revert(t, fleetRepo, "main", st.LastPushCommit)
	st = requestFluxRun(t, auto)
	g.Expect(f.tip("main")).To(Equal(revert))
	g.Expect(conditions.IsReady(auto)).To(BeTrue())
	g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(HaveSuffix("1 held"))

	// Releasing the hold with uprev's annotation writes the version again.
	g.Eventually(func() error {
		getFluxAutomation(g, auto)
		auto.Annotations = map[string]string{uprevv1.HoldReleaseAnnotation: f.ns + "/agent 1.1.0"}
		return k8s.Update(context.Background(), auto)
	}).Should(Succeed())
	st = waitForFluxPush(t, auto, st.LastPushCommit)
	g.Expect(f.tip("main")).To(Equal(st.LastPushCommit))
	g.Expect(f.readFile("main", "clusters/my-cluster/agent.yaml")).To(ContainSubstring(f.image + ":1.1.0 #"))
	tip := st.LastPushCommit

	// Suspended, it does not run; deleted, it is released.
	g.Eventually(func() error {
		getFluxAutomation(g, auto)
		auto.Spec.Suspend = true
		return k8s.Update(context.Background(), auto)
	}).Should(Succeed())
	f.pushTag("1.2.0")
	requestReconcile(t, auto)
	g.Consistently(func(g Gomega) {
		g.Expect(f.tip("main")).To(Equal(tip))
	}, "2s").Should(Succeed())
	g.Expect(k8s.Delete(context.Background(), auto)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(auto), &iacv1.ImageUpdateAutomation{}))
	}).Should(BeTrue(), "the finalizer is released")
}

func TestImageUpdateAutomationPushBranchRefspecAndOptions(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{
		"clusters/my-cluster/agent.yaml": agentDeployment,
	}, gitserver.WithBasicAuth("flux", "s3cret"))
	// A hook records the push options the server receives.
	repoDir := f.git.RepoDir(fleetRepo)
	f.git.Git(t, fleetRepo, "config", "receive.advertisePushOptions", "true")
	hook := filepath.Join(repoDir, "hooks", "pre-receive")
	g.Expect(os.MkdirAll(filepath.Dir(hook), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(hook, []byte("#!/bin/sh\ncat >/dev/null\nenv | grep '^GIT_PUSH_OPTION_[0-9]' | cut -d= -f2- | sort >>\""+repoDir+"/push-options\"\n"), 0o755)).To(Succeed())
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.1.0")
	mainTip := f.tip("main")

	f.fluxSource()
	auto := f.fluxAutomation(func(a *iacv1.ImageUpdateAutomation) {
		a.Spec.GitSpec.Push = &iacv1.PushSpec{
			Branch:  "image-updates",
			Refspec: "refs/heads/image-updates:refs/heads/review/image-updates",
			Options: map[string]string{"ci.skip": "", "merge_request.create": ""},
		}
	})
	st := waitForFluxPush(t, auto, "")
	g.Expect(f.tip("main")).To(Equal(mainTip), "the checkout branch is not written")
	g.Expect(f.tip("image-updates")).To(Equal(st.LastPushCommit))
	g.Expect(f.tip("review/image-updates")).To(Equal(st.LastPushCommit), "pushed to the refspec's destination too")
	g.Expect(st.ObservedSourceRevision).To(Equal("main@sha1:"+mainTip), "as in Flux: the checkout branch's tip")
	options, err := os.ReadFile(filepath.Join(repoDir, "push-options"))
	g.Expect(err).NotTo(HaveOccurred())
	// As go-git (and so Flux) sends them: key=value, also for an empty value.
	g.Expect(strings.Fields(string(options))).To(ContainElements("ci.skip=", "merge_request.create="))
}

func TestImageUpdateAutomationReportsBadInput(t *testing.T) {
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{"clusters/my-cluster/agent.yaml": agentDeployment})
	cases := []struct {
		name   string
		mutate func(*iacv1.ImageUpdateAutomation)
		reason string
		text   string
	}{
		{name: "missing-source", mutate: func(a *iacv1.ImageUpdateAutomation) { a.Spec.SourceRef.Name = "absent" },
			reason: iacv1.SourceManagerFailedReason, text: "GitRepository " + f.ns + "/absent not found"},
		{name: "tag-checkout", mutate: func(a *iacv1.ImageUpdateAutomation) {
			a.Spec.GitSpec.Checkout.Reference = sourcev1.GitRepositoryRef{Tag: "v1.0.0"}
		}, reason: "InvalidSpec", text: "spec.git.checkout.ref: uprev checks out only a branch"},
		{name: "removed-field", mutate: func(a *iacv1.ImageUpdateAutomation) {
			a.Spec.GitSpec.Commit.MessageTemplate = "{{ range .Updated.Images }}{{ . }}{{ end }}"
		}, reason: iacv1.RemovedTemplateFieldReason, text: "removed from Flux's v1 API: .Updated"},
		{name: "repeat", mutate: func(a *iacv1.ImageUpdateAutomation) {
			a.Spec.GitSpec.Commit.MessageTemplate = `{{ repeat 300000000 "a" }}`
		}, reason: "InvalidSpec", text: "error calling repeat: commit message template exceeds a bound: repeat of more than 65536 bytes"},
		{name: "long-message", mutate: func(a *iacv1.ImageUpdateAutomation) {
			a.Spec.GitSpec.Commit.MessageTemplate = `{{ range 10000 }}0123456789{{ end }}`
		}, reason: "InvalidSpec", text: "the message is longer than 65536 bytes"},
		{name: "refspec", mutate: func(a *iacv1.ImageUpdateAutomation) {
			a.Spec.GitSpec.Push.Refspec = "refs/heads/other:refs/heads/x"
		}, reason: "InvalidSpec", text: "the source must be the push branch main"},
	}
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.0.0")
	f.pushTag("1.1.0")
	waitForLatestTag(t, pol, "1.1.0")
	f.fluxSource()
	objs := make([]*iacv1.ImageUpdateAutomation, len(cases))
	for i, tc := range cases {
		objs[i] = f.fluxAutomation(func(a *iacv1.ImageUpdateAutomation) {
			a.Name = tc.name
			tc.mutate(a)
		})
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) {
				auto := getFluxAutomation(g, objs[i])
				ready := conditions.Get(auto, meta.ReadyCondition)
				g.Expect(ready).NotTo(BeNil())
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(ready.Reason).To(Equal(tc.reason))
				g.Expect(ready.Message).To(ContainSubstring(tc.text))
			}).Should(Succeed())
		})
	}
	NewWithT(t).Expect(f.log("main")).To(HaveLen(1), "nothing pushed")
}
