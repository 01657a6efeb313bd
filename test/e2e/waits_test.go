package e2e

import (
	"context"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/fleet"
)

// get reads obj afresh.
func get(g Gomega, obj client.Object) {
	g.ExpectWithOffset(1, k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	if s, ok := obj.(*uprevv1.Sync); ok {
		// A Sync's targets are read from their SyncTargets, as readers do.
		syncs := []uprevv1.Sync{*s}
		g.ExpectWithOffset(1, fleet.AttachTargets(context.Background(), k8s, syncs)).To(Succeed())
		*s = syncs[0]
	}
}

// waitForTag waits until the policy selects tag and returns its latest
// reference, name:tag[@digest].
func waitForTag(t testing.TB, pol *imagev1.ImagePolicy, tag string) string {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		get(g, pol)
		g.Expect(pol.Status.LatestRef).NotTo(BeNil())
		g.Expect(pol.Status.LatestRef.Tag).To(Equal(tag))
	}).Should(Succeed())
	return pol.Status.LatestRef.String()
}

// waitForScan waits until the repository's last scan found tags tags.
func waitForScan(t testing.TB, repo *imagev1.ImageRepository, tags int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		get(g, repo)
		g.Expect(repo.Status.LastScanResult).NotTo(BeNil())
		g.Expect(repo.Status.LastScanResult.TagCount).To(Equal(tags))
	}).Should(Succeed())
}

// requestReconcile asks for a reconcile now, as `flux reconcile` does.
func requestReconcile(t testing.TB, obj client.Object) string {
	t.Helper()
	token := time.Now().Format(time.RFC3339Nano)
	NewWithT(t).Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[meta.ReconcileRequestAnnotation] = token
		obj.SetAnnotations(ann)
		return k8s.Update(context.Background(), obj)
	}).Should(Succeed())
	return token
}

// runAutomation asks auto for a run and waits until the controller has
// handled that request; it returns the status the run left.
func runAutomation(t testing.TB, auto *uprevv1.UpdateAutomation) uprevv1.UpdateAutomationStatus {
	t.Helper()
	token := requestReconcile(t, auto)
	NewWithT(t).Eventually(func(g Gomega) {
		get(g, auto)
		g.Expect(auto.Status.LastHandledReconcileAt).To(Equal(token))
	}).Should(Succeed())
	return auto.Status
}

// waitForPush waits until auto reports a pushed commit other than previous
// and returns it.
func waitForPush(t testing.TB, auto *uprevv1.UpdateAutomation, previous string) string {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		get(g, auto)
		g.Expect(auto.Status.LastPushCommit).NotTo(BeEmpty())
		g.Expect(auto.Status.LastPushCommit).NotTo(Equal(previous))
	}).Should(Succeed())
	return auto.Status.LastPushCommit
}

// waitApplied waits until each named target of the Sync applied (and, for
// a Sync that waits, found healthy) the revision of branch main at commit.
func waitApplied(t testing.TB, s *uprevv1.Sync, commit string, targets ...string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		get(g, s)
		for _, name := range targets {
			ts := targetStatus(g, s, name)
			g.Expect(ts.LastAppliedRevision).To(Equal("main@sha1:"+commit), "target %s: %s", name, ts.Message)
		}
	}).Should(Succeed())
}

// targetStatus returns the status of the Sync's target name.
func targetStatus(g Gomega, s *uprevv1.Sync, name string) uprevv1.TargetStatus {
	for _, ts := range s.Status.Targets {
		if ts.Name == name {
			return ts
		}
	}
	g.Expect(s.Status.Targets).To(ContainElement(HaveField("Name", name)), "target %s has no status", name)
	return uprevv1.TargetStatus{}
}

// deploymentImage returns the image of the first container of Deployment
// ns/name in the cluster c reaches.
func deploymentImage(g Gomega, c client.Client, ns, name string) string {
	var d appsv1.Deployment
	g.ExpectWithOffset(1, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return d.Spec.Template.Spec.Containers[0].Image
}

// waitForImage waits until Deployment ns/name runs image in every cluster
// of clients.
func waitForImage(t testing.TB, ns, name, image string, clients ...client.Client) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		for _, c := range clients {
			g.Expect(deploymentImage(g, c, ns, name)).To(Equal(image))
		}
	}).Should(Succeed())
}

// readyStatus returns the status of the Sync's Ready condition.
func readyStatus(g Gomega, s *uprevv1.Sync) metav1.ConditionStatus {
	get(g, s)
	c := conditions.Get(s, meta.ReadyCondition)
	g.Expect(c).NotTo(BeNil())
	return c.Status
}

// eventNotes returns "type reason: note" of the events about the object
// name in namespace ns.
func eventNotes(g Gomega, ns, name string) []string {
	var list eventsv1.EventList
	g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			notes = append(notes, e.Type+" "+e.Reason+": "+e.Note)
		}
	}
	return notes
}
