package controllers

import (
	"context"

	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// namespaceManifest returns the YAML of a Namespace.
func namespaceManifest(name string) string {
	return "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n"
}

// deleteAndWaitGone deletes the Sync and waits until the API server no
// longer has it, which needs uprev to release its finalizer.
func deleteAndWaitGone(t testing.TB, s *uprevv1.Sync) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(k8s.Delete(context.Background(), s)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(s), &uprevv1.Sync{}))
	}).WithTimeout(time.Minute).Should(BeTrue(), "the Sync is released")
}

// configMapExists tells whether the ConfigMap ns/name is in the cluster c.
func configMapExists(g Gomega, c client.Client, ns, name string) bool {
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	return err == nil
}

func TestSyncDeletionWithPruneDeletesWhatItApplied(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	extra := ns + "-extra"
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{
		"app/ns.yaml":     namespaceManifest(extra),
		"app/config.yaml": configMap(ns, "settings", "v1"),
	})
	s := newSync(t, ns, url, "app")
	waitApplied(t, s, srv.Log(t, "fleet", "main")[0].SHA, "local")
	// The Sync is read from the manager's cache, its SyncTargets from the
	// API server: the cache may lag behind.
	g.Eventually(func(g Gomega) {
		getSync(g, s)
		g.Expect(s.Finalizers).To(ContainElement(uprevv1.Finalizer))
	}).Should(Succeed())
	g.Expect(configMapExists(g, k8s, ns, "settings")).To(BeTrue())

	g.Expect(syncTargets(g, ns, s.Name)).To(HaveLen(1))
	deleteAndWaitGone(t, s)
	g.Expect(configMapExists(g, k8s, ns, "settings")).To(BeFalse(), "what the Sync applied is deleted")
	g.Expect(syncTargets(g, ns, s.Name)).To(BeEmpty(), "the targets' records go with the Sync")
	var kept corev1.Namespace
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: extra}, &kept)).To(Succeed())
	g.Expect(kept.DeletionTimestamp).To(BeNil(), "a Namespace is kept unless annotated, as for pruning")
	expectEvent(t, ns, s.Name, "Deleted", "ConfigMap")
}

func TestSyncDeletionOrphansWithoutPruneOrWhenSuspended(t *testing.T) {
	for name, mutate := range map[string]func(*uprevv1.Sync){
		"prune off": func(s *uprevv1.Sync) { s.Spec.Prune = false },
		"suspended": nil,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			srv := gitserver.Start(t)
			url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
			var s *uprevv1.Sync
			if mutate != nil {
				s = newSync(t, ns, url, "app", mutate)
			} else {
				s = newSync(t, ns, url, "app")
			}
			waitApplied(t, s, srv.Log(t, "fleet", "main")[0].SHA, "local")
			if mutate == nil {
				patch := client.MergeFrom(s.DeepCopy())
				s.Spec.Suspend = true
				g.Expect(k8s.Patch(context.Background(), s, patch)).To(Succeed())
			}
			deleteAndWaitGone(t, s)
			g.Expect(configMapExists(g, k8s, ns, "settings")).To(BeTrue(), "the objects are orphaned")
		})
	}
}

func TestSyncDeletionGivesUpOnAnUnreachableTarget(t *testing.T) {
	g := NewWithT(t)
	startRemoteClusters(t)
	ns := newNamespace(t)
	ensureNamespace(t, remoteClusters.euC, ns)
	kubeConfigSecret(t, ns, "eu-1", remoteClusters.euKC)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	s := newSync(t, ns, url, "app", func(s *uprevv1.Sync) {
		s.Spec.Targets = []uprevv1.Target{
			{Name: "local"},
			{Name: "eu-1", KubeConfig: &uprevv1.KubeConfigReference{SecretRef: metaRef("eu-1")}},
		}
		s.Spec.Timeout = &metav1.Duration{Duration: 3 * time.Second}
	})
	waitApplied(t, s, srv.Log(t, "fleet", "main")[0].SHA, "local", "eu-1")

	// eu-1 becomes unreachable: its kubeconfig now points at a closed port.
	var secret corev1.Secret
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "eu-1"}, &secret)).To(Succeed())
	secret.Data[kubeConfigKey] = []byte(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: admin, user: {token: not-a-real-token}}]
contexts: [{name: gone, context: {cluster: gone, user: admin}}]
current-context: gone
`)
	g.Expect(k8s.Update(context.Background(), &secret)).To(Succeed())

	deleteAndWaitGone(t, s)
	g.Expect(configMapExists(g, k8s, ns, "settings")).To(BeFalse(), "the reachable target is cleaned up")
	g.Expect(configMapExists(g, remoteClusters.euC, ns, "settings")).To(BeTrue(), "the unreachable one is given up on")
	expectEvent(t, ns, s.Name, "DeletionGivenUp", "eu-1")
}

// cloneDirs lists the repositories the manager's clone cache holds.
func cloneDirs(g Gomega) []string {
	entries, err := os.ReadDir(filepath.Join(storagePath, "git"))
	g.Expect(err).NotTo(HaveOccurred())
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

func TestDeletedSyncsAndAutomationsLeaveNoClone(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	before := cloneDirs(g)
	srv := gitserver.Start(t)
	// Named after the namespace: a port of an earlier test's server, given
	// again, with the same name would find that test's clone still kept.
	repoName := ns
	url := srv.InitRepo(t, repoName, "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	var syncs []*uprevv1.Sync
	for i := range 5 {
		syncs = append(syncs, newSync(t, ns, url, "app", func(s *uprevv1.Sync) {
			s.Name = fmt.Sprintf("fleet-%d", i)
			s.Spec.Prune = false
		}))
	}
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
			},
		},
	}
	g.Expect(k8s.Create(context.Background(), auto)).To(Succeed())
	for _, s := range syncs {
		waitApplied(t, s, srv.Log(t, repoName, "main")[0].SHA, "local")
	}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(auto), auto)).To(Succeed())
		g.Expect(auto.Finalizers).To(ContainElement(uprevv1.Finalizer))
		g.Expect(auto.Status.ObservedGeneration).To(Equal(auto.Generation))
	}).Should(Succeed())
	var ours []string
	for _, dir := range cloneDirs(g) {
		if !slices.Contains(before, dir) {
			ours = append(ours, dir)
		}
	}
	g.Expect(ours).To(HaveLen(1), "one directory for the repository, whatever its users")

	for _, s := range syncs {
		deleteAndWaitGone(t, s)
	}
	g.Expect(k8s.Delete(context.Background(), auto)).To(Succeed())
	// The sweep is awaited beside the other tests: the directories were
	// counted above while no other test ran, and the clone is this test's.
	removed := make(chan string, 1) // why it was not removed in time, "" when it was
	go func() {
		var failure string
		NewGomega(func(message string, _ ...int) { failure = message }).
			Eventually(cloneDirs).WithTimeout(time.Minute).ShouldNot(ContainElement(ours[0]), "no clone of a repository no live object uses, within a minute")
		removed <- failure
	}()
	t.Parallel()
	if failure := <-removed; failure != "" {
		t.Error(failure)
	}
}

func TestSyncShowsReconcilingDuringAHealthWait(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	// No kubelet runs here: the Deployment never becomes available, so the
	// health wait lasts until the timeout.
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/deploy.yaml": deployment(ns, "agent", "acme/agent:1.0.0")})
	s := newSync(t, ns, url, "app", func(s *uprevv1.Sync) {
		s.Spec.Wait = true
		s.Spec.Timeout = &metav1.Duration{Duration: 5 * time.Minute}
	})
	tip := srv.Log(t, "fleet", "main")[0].SHA
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(s), s)).To(Succeed())
		c := conditions.Get(s, meta.ReconcilingCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(Equal("applying main@sha1:" + tip + " to local"))
	}).Should(Succeed(), "a person watching sees the apply under way")
}

func TestSyncMissingKubeConfigSecretHasItsOwnReason(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(ns, "settings", "v1")})
	s := newSync(t, ns, url, "app", func(s *uprevv1.Sync) {
		s.Spec.Targets = []uprevv1.Target{{Name: "eu-1", KubeConfig: &uprevv1.KubeConfigReference{SecretRef: metaRef("eu-1-not-yet")}}}
	})
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, s)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.SecretNotFoundReason))
		g.Expect(c.Message).To(ContainSubstring("eu-1-not-yet"))
		g.Expect(conditions.IsStalled(s)).To(BeFalse(), "retried until the Secret appears")
	}).Should(Succeed())
}
