package tenancy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// recordingServer stands for an address inside the cluster's network that
// a tenant wants the manager to read for them: it answers every request
// with a valid document and records it.
func recordingServer(t *testing.T) (url string, requests func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		if strings.Contains(r.URL.Path, "patch") {
			_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {fetched: internal-answer}\n"))
			return
		}
		_, _ = w.Write([]byte("internal-answer\n"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// createSync creates the Sync "apps" of path in url onto the local
// cluster, pruning.
func createSync(t *testing.T, ns, url, path string) *uprevv1.Sync {
	t.Helper()
	s := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apps"},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
			Path:     path,
			Targets:  []uprevv1.Target{localTarget()},
			Prune:    true,
		},
	}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatalf("creating Sync: %v", err)
	}
	return s
}

// configMapNames lists the ConfigMaps of ns that a Sync could have made.
func configMapNames(g Gomega, ns string) []string {
	var list corev1.ConfigMapList
	g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var names []string
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" {
			names = append(names, cm.Name)
		}
	}
	return names
}

// settled returns a function that reads s and returns its Ready condition
// once a run has finished (Ready is True or False).
func settled(s *uprevv1.Sync) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		c := readyCondition(s, func() []metav1.Condition { return s.Status.Conditions })(g)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).NotTo(Equal(metav1.ConditionUnknown))
		return c
	}
}

func TestKustomizeFetchesNothingForATenant(t *testing.T) {
	startManager(t, "--controllers=sync")
	server, requests := recordingServer(t)
	tests := []struct {
		name          string
		kustomization string
		field         string
	}{{
		name:          "configMapGenerator",
		kustomization: "configMapGenerator:\n- name: leak\n  files:\n  - " + server + "/latest/meta-data/token\n",
		field:         "configMapGenerator[0].files[0]",
	}, {
		name:          "patch",
		kustomization: "patches:\n- path: " + server + "/patch.yaml\n",
		field:         "patches[0].path",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t, "fetch")
			git := gitserver.Start(t)
			url := git.InitRepo(t, "apps", "main", map[string]string{
				"kustomization.yaml": "namespace: " + ns + "\nresources: [app.yaml]\n" + tt.kustomization,
				"app.yaml":           configMap(ns, "app"),
			})
			s := createSync(t, ns, url, "./")

			var ready *metav1.Condition
			g.Eventually(settled(s)).Should(WithTransform(func(c *metav1.Condition) bool { ready = c; return true }, BeTrue()))
			g.Expect(requests()).To(BeEmpty(), "the manager must not fetch what a kustomization names")
			g.Expect(configMapNames(g, ns)).To(BeEmpty(), "nothing of the revision is applied")
			g.Expect(ready).To(And(
				HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", uprevv1.BuildFailedReason),
				HaveField("Message", And(ContainSubstring("kustomization.yaml: "+tt.field), ContainSubstring("remote location")))))
		})
	}
}

func TestSyncPathLinkedOutOfCheckoutAppliesAndPrunesNothing(t *testing.T) {
	startManager(t, "--controllers=sync")
	// outside holds a manifest the tenant would like applied from the
	// manager's file system.
	outside := t.TempDir()
	tests := []struct {
		name   string
		target func(ns string) string
	}{{
		name:   "absolute",
		target: func(string) string { return outside },
	}, {
		// Enough ".." to reach / from any checkout, then down to outside.
		name:   "relative",
		target: func(string) string { return strings.Repeat("../", 40) + strings.TrimPrefix(outside, "/") },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t, "link-"+tt.name)
			g.Expect(os.WriteFile(filepath.Join(outside, ns+".yaml"), []byte(configMap(ns, "outside")), 0o644)).To(Succeed())
			git := gitserver.Start(t)
			url := git.InitRepo(t, "apps", "main", map[string]string{"deploy/app.yaml": configMap(ns, "app")})
			s := createSync(t, ns, url, "deploy")
			g.Eventually(settled(s)).Should(HaveField("Status", metav1.ConditionTrue))
			g.Expect(configMapNames(g, ns)).To(ConsistOf("app"))

			link := git.CommitSymlink(t, "apps", "main", "deploy", tt.target(ns), "Point deploy out of the checkout")
			requestReconcile(t, s)
			var ready *metav1.Condition
			g.Eventually(func(g Gomega) {
				ready = settled(s)(g)
				g.Expect(s.Status.LastAttemptedRevision).To(HaveSuffix(link))
			}).Should(Succeed())
			g.Expect(configMapNames(g, ns)).To(ConsistOf("app"), "nothing is pruned, nothing from outside is applied")
			g.Expect(ready).To(And(
				HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", uprevv1.BuildFailedReason),
				HaveField("Message", ContainSubstring("building deploy: "))))
		})
	}
}
