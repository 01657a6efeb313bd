package e2e

import (
	"context"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// TestFleetWavesWaitForAHealthyFirstWave runs examples/fleet-waves: three
// clusters, the local one first, then eu-1 and us-1 together; a new
// release reaches the second wave only once the first runs it healthy.
func TestFleetWavesWaitForAHealthyFirstWave(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	eu, us := remoteClusters(t)
	const example = "fleet-waves"
	s := newScenario(t, example)
	s.rename(example, s.ns)
	web := s.ns + "-web"
	s.rename("web-system", web)
	image := s.reg.Image("acme/web")
	clusters := map[string]client.Client{"local": k8s, "eu-1": eu.client, "us-1": us.client}
	secondWave := []client.Client{eu.client, us.client}

	d100 := s.reg.PushImage(t, "acme/web", "1.0.0")
	v100 := image + ":1.0.0@" + d100
	s.initRepo(s.exampleFleet(example))
	s.kubeConfigSecret("eu-1-kubeconfig", eu)
	s.kubeConfigSecret("us-1-kubeconfig", us)
	objs := s.exampleObjects(example)
	repo := object[*imagev1.ImageRepository](t, objs, "web")
	pol := object[*imagev1.ImagePolicy](t, objs, "web")
	auto := object[*uprevv1.UpdateAutomation](t, objs, "web")
	sync := object[*uprevv1.Sync](t, objs, "web")
	create(t, repo, pol, auto)
	pin := waitForPush(t, auto, "")
	g.Expect(s.readFile("main", "clusters/web/web.yaml")).To(ContainSubstring(v100))

	// The first rollout: each wave is made healthy as it gets the revision.
	create(t, sync)
	rollOut(t, sync, pin, v100, web, clusters, secondWave)

	// A release: committed once, rolled out wave by wave.
	v110 := image + ":1.1.0@" + s.reg.PushImage(t, "acme/web", "1.1.0")
	requestReconcile(t, repo)
	release := waitForPush(t, auto, pin)
	g.Expect(s.subjects("main")).To(Equal([]string{"Update web to 1.1.0", "Update web to 1.0.0@" + d100, "Initial commit"}))
	rollOut(t, sync, release, v110, web, clusters, secondWave)
}

// rollOut follows a Sync rolling out revision main@commit, which runs
// image in Deployment ns/web, in two waves: local, then the clusters of
// second. It checks that the second wave is left alone while the first is
// not healthy, plays the deployment controller in each cluster, and waits
// until the Sync is Ready at that revision everywhere.
func rollOut(t *testing.T, sync *uprevv1.Sync, commit, image, ns string, clusters map[string]client.Client, second []client.Client) {
	t.Helper()
	g := NewWithT(t)
	waitForImage(t, ns, "web", image, k8s)
	g.Consistently(func(g Gomega) {
		for _, c := range second {
			var d appsv1.Deployment
			err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &d)
			if apierrors.IsNotFound(err) {
				continue
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).NotTo(Equal(image), "the second wave waits for the first to be healthy")
		}
		get(g, sync)
		for _, ts := range sync.Status.Targets {
			g.Expect(ts.LastAppliedRevision).NotTo(HaveSuffix(commit), "%s: the first wave is not healthy yet", ts.Name)
		}
	}).Should(Succeed())

	healthy := time.Now()
	g.Eventually(func() error { return cluster.MarkDeploymentAvailable(context.Background(), k8s, ns, "web") }).Should(Succeed())
	waitForImage(t, ns, "web", image, second...)
	for _, c := range second {
		g.Eventually(func() error { return cluster.MarkDeploymentAvailable(context.Background(), c, ns, "web") }).Should(Succeed())
	}
	waitApplied(t, sync, commit, "local", "eu-1", "us-1")
	g.Eventually(func(g Gomega) { g.Expect(readyStatus(g, sync)).To(Equal(metav1.ConditionTrue)) }).Should(Succeed())
	for _, name := range []string{"eu-1", "us-1"} {
		applied := targetStatus(g, sync, name).LastAppliedTime
		g.Expect(applied).NotTo(BeNil())
		g.Expect(applied.Time).To(BeTemporally(">=", healthy.Truncate(time.Second)), "%s applied after local was healthy", name)
	}
	for name, c := range clusters {
		g.Expect(deploymentImage(g, c, ns, "web")).To(Equal(image), name)
	}
}
