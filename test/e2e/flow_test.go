package e2e

import (
	"fmt"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// agentManifests is the content of clusters/prod: a Namespace and a
// Deployment running image, marked for the policy ns/agent.
func agentManifests(appNS, image, policyNS string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: agent
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
        - name: agent
          image: %[2]s # {"$imagepolicy": "%[3]s:agent"}
`, appNS, image, policyNS)
}

// TestTagPushReachesClustersAndRevertHolds is the whole flow on real
// components: a tag push, announced by a registry notification, ends in
// the new image running in the local cluster and in a remote one, through
// exactly one commit; a git revert of that commit brings both clusters
// back and the automation holds the reverted version; a newer tag goes
// through again.
func TestTagPushReachesClustersAndRevertHolds(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	eu, _ := remoteClusters(t)
	s := newScenario(t, "flow")
	token := s.webhookToken()
	image := s.reg.Image("acme/agent")
	apps := s.ns + "-apps"

	// Git starts at 1.0.0, pinned by digest, as uprev would have left it.
	v100 := image + ":1.0.0@" + s.reg.PushImage(t, "acme/agent", "1.0.0")
	s.initRepo(map[string]string{"clusters/prod/agent.yaml": agentManifests(apps, v100, s.ns)})
	initial := s.tip("main")
	s.kubeConfigSecret("eu-1-kubeconfig", eu)

	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: image, Interval: metav1.Duration{Duration: time.Hour}},
	}
	pol := &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "agent"},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef:     meta.NamespacedObjectReference{Name: "agent"},
			Policy:                 imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
			DigestReflectionPolicy: imagev1.ReflectIfNotPresent,
		},
	}
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "fleet"},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: s.url, Ref: uprevv1.GitRef{Branch: "main"}},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
			},
			Update: uprevv1.UpdateStrategy{Path: "./clusters"},
		},
	}
	sync := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "prod"},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: s.url, Ref: uprevv1.GitRef{Branch: "main"}},
			Path:     "./clusters/prod",
			Targets: []uprevv1.Target{
				{Name: "local"},
				{Name: "eu-1", KubeConfig: &uprevv1.KubeConfigReference{SecretRef: meta.LocalObjectReference{Name: "eu-1-kubeconfig"}}},
			},
			Prune: true,
		},
	}
	create(t, repo, pol, auto, sync)
	clusters := []string{"local", "eu-1"}

	waitApplied(t, sync, initial, clusters...)
	waitForImage(t, apps, "agent", v100, k8s, eu.client)
	g.Expect(waitForTag(t, pol, "1.0.0")).To(Equal(v100))
	st := runAutomation(t, auto)
	g.Expect(st.LastPushCommit).To(BeEmpty(), "Git already has what the policy selects")
	g.Expect(s.tip("main")).To(Equal(initial))

	// A release: the registry announces the push, and the new version goes
	// all the way to both clusters in one commit.
	v110 := image + ":1.1.0@" + s.reg.PushImage(t, "acme/agent", "1.1.0")
	g.Expect(s.notifyRegistryPush(token, "acme/agent", "1.1.0")).To(Equal([]string{"ImageRepository/" + s.ns + "/agent"}))
	waitForImage(t, apps, "agent", v110, k8s, eu.client)
	update := s.tip("main")
	g.Expect(s.subjects("main")).To(Equal([]string{"Update agent to 1.1.0", "Initial commit"}))
	g.Expect(s.changedFiles(update)).To(Equal([]string{"clusters/prod/agent.yaml"}))
	g.Expect(s.message(update)).To(Equal(fmt.Sprintf("Update agent to 1.1.0\n\nclusters/prod/agent.yaml: %s --> %s\n\nUprev-Update: %s/agent 1.0.0 --> 1.1.0", v100, v110, s.ns)))
	waitApplied(t, sync, update, clusters...)

	// A person reverts it; the Git server announces the push, and both
	// clusters go back.
	revert := s.git.Revert(t, fleetRepo, "main", update)
	g.Expect(s.notifyGitPush(token, "main")).To(ConsistOf("Sync/"+s.ns+"/prod", "UpdateAutomation/"+s.ns+"/fleet"))
	waitApplied(t, sync, revert, clusters...)
	waitForImage(t, apps, "agent", v100, k8s, eu.client)

	// The automation holds the reverted version, however often it runs and
	// whatever the registry says again.
	held := []uprevv1.Hold{{Policy: s.ns + "/agent", Version: "1.1.0", RevertedIn: revert}}
	for range 2 {
		st := runAutomation(t, auto)
		g.Expect(st.Holds).To(Equal(held))
		g.Expect(st.LastPushCommit).To(Equal(update))
		g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(Or(
			Equal("no change; 1 held"), Equal("no change: nothing new since main@sha1:"+revert+"; 1 held")))
		g.Expect(s.tip("main")).To(Equal(revert), "no commit on top of the revert")
	}
	s.notifyRegistryPush(token, "acme/agent", "1.1.0")
	g.Expect(runAutomation(t, auto).Holds).To(Equal(held))
	g.Expect(s.tip("main")).To(Equal(revert))
	waitForImage(t, apps, "agent", v100, k8s, eu.client)

	// A newer release goes through, on top of the revert.
	v120 := image + ":1.2.0@" + s.reg.PushImage(t, "acme/agent", "1.2.0")
	s.notifyRegistryPush(token, "acme/agent", "1.2.0")
	waitForImage(t, apps, "agent", v120, k8s, eu.client)
	fix := s.tip("main")
	g.Expect(s.subjects("main")).To(Equal([]string{
		"Update agent to 1.2.0",
		`Revert "Update agent to 1.1.0"`,
		"Update agent to 1.1.0",
		"Initial commit",
	}))
	g.Expect(s.message(fix)).To(Equal(fmt.Sprintf("Update agent to 1.2.0\n\nclusters/prod/agent.yaml: %s --> %s\n\nUprev-Update: %s/agent 1.0.0 --> 1.2.0", v100, v120, s.ns)))
	waitApplied(t, sync, fix, clusters...)
	g.Eventually(func(g Gomega) {
		get(g, auto)
		g.Expect(auto.Status.LastPushCommit).To(Equal(fix))
		g.Expect(auto.Status.Holds).To(BeEmpty(), "the hold ends once the policy moves past it")
	}).Should(Succeed())
}
