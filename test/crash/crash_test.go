// Package crash kills the real uprev binary with SIGKILL while it pushes
// to Git and while it applies hundreds of objects, restarts it each time,
// and checks that nothing is lost: every commit by someone else stays,
// history stays linear without a force push, the final state is the newest
// version, prune removes exactly what left Git, and no lock or half-written
// file stops the next run.
package crash

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/fleet"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// objectsPerRevision is how many ConfigMaps each revision of the Sync's
// path holds.
const objectsPerRevision = 300

// configMaps returns a manifest of objectsPerRevision ConfigMaps in ns,
// named for generation, so a revision of a new generation replaces every
// object of the one before.
func configMaps(ns string, generation int) string {
	var b strings.Builder
	for i := range objectsPerRevision {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gen-%d-%03d\n  namespace: %s\ndata:\n  n: %q\n", generation, i, ns, fmt.Sprint(i))
	}
	return b.String()
}

// agent is the marked file the automation rewrites.
func agent(ns, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: agent\n  namespace: %s\ndata:\n  image: %s # {\"$imagepolicy\": \"%s:agent\"}\n", ns, image, ns)
}

func TestManagerSurvivesSIGKILL(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := manager.StartCluster(t)
	kubeconfigPath, k8s := c.KubeConfigPath, c.Client

	const ns = "crash"
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	reg := registry.Start(t)
	image := reg.Image("acme/agent")
	reg.PushTags(t, "acme/agent", "1.0.0")
	git := gitserver.Start(t)
	url := git.InitRepo(t, "fleet", "main", map[string]string{
		"app/agent.yaml": agent(ns, image+":1.0.0"),
		"app/many.yaml":  configMaps(ns, 0),
	})
	// The server refuses any push that is not a fast-forward.
	git.Git(t, "fleet", "config", "receive.denyNonFastForwards", "true")

	objects := []client.Object{
		&imagev1.ImageRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			Spec:       imagev1.ImageRepositorySpec{Image: image, Interval: metav1.Duration{Duration: time.Second}},
		},
		&imagev1.ImagePolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			Spec: imagev1.ImagePolicySpec{
				ImageRepositoryRef:     meta.NamespacedObjectReference{Name: "agent"},
				Policy:                 imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
				DigestReflectionPolicy: imagev1.ReflectIfNotPresent,
			},
		},
		&uprevv1.UpdateAutomation{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
			Spec: uprevv1.UpdateAutomationSpec{
				Interval: metav1.Duration{Duration: 30 * time.Second},
				Git: uprevv1.GitSpec{
					GitSource: uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
					Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
				},
			},
		},
		&uprevv1.Sync{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
			Spec: uprevv1.SyncSpec{
				Interval: metav1.Duration{Duration: 30 * time.Second},
				Git:      uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
				Path:     "app",
				Targets:  []uprevv1.Target{{Name: "local"}},
				Prune:    true,
			},
		},
	}
	for _, obj := range objects {
		g.Expect(k8s.Create(ctx, obj)).To(Succeed())
	}

	bin := manager.Build(t)
	storage := t.TempDir()
	start := func() *manager.Process {
		// The ImageRepository's interval of 1 s is under the manager's
		// floor by default.
		return manager.Start(t, bin, kubeconfigPath, storage, "--log-level=info", "--min-interval=1s")
	}
	generationObjects := func(generation int) func() int {
		return func() int {
			var list corev1.ConfigMapList
			g.Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			n := 0
			for _, cm := range list.Items {
				if strings.HasPrefix(cm.Name, fmt.Sprintf("gen-%d-", generation)) {
					n++
				}
			}
			return n
		}
	}

	var theirs []string
	kills := 0
	for round := 1; round <= 8; round++ {
		// Someone else pushes meanwhile, and a new tag appears.
		theirs = append(theirs, git.CommitFile(t, "fleet", "main", fmt.Sprintf("notes/%d.txt", round), fmt.Sprint(round), fmt.Sprintf("Note %d", round)))
		reg.PushTags(t, "acme/agent", fmt.Sprintf("1.%d.0", round))
		proc := start()
		if round%2 == 1 {
			// Kill as the automation starts its push.
			pushes := git.Counts().ReceivePack
			g.Eventually(func() int64 { return git.Counts().ReceivePack }).
				WithTimeout(2*time.Minute).WithPolling(5*time.Millisecond).Should(BeNumerically(">", pushes), "round %d: a push starts", round)
		} else {
			// Kill while the Sync applies a revision that replaces all
			// 300 objects.
			theirs = append(theirs, git.CommitFile(t, "fleet", "main", "app/many.yaml", configMaps(ns, round), fmt.Sprintf("Generation %d", round)))
			g.Eventually(generationObjects(round)).
				WithTimeout(2*time.Minute).WithPolling(5*time.Millisecond).Should(BeNumerically(">", 0), "round %d: the apply starts", round)
		}
		proc.Kill()
		kills++
	}
	g.Expect(kills).To(BeNumerically(">=", 8))

	// Restarted once more, the manager ends where Git and the registry are.
	final := start()
	const last = 8
	g.Eventually(func(g Gomega) {
		content := git.ReadFile(t, "fleet", "main", "app/agent.yaml")
		g.Expect(content).To(ContainSubstring(fmt.Sprintf("%s:1.%d.0@sha256:", image, last)))
	}).WithTimeout(3*time.Minute).Should(Succeed(), "the newest version is in Git")

	log := git.Log(t, "fleet", "main")
	var shas []string
	for _, commit := range log {
		g.Expect(len(commit.Parents)).To(BeNumerically("<=", 1), "history stays linear: %s", commit.Subject)
		shas = append(shas, commit.SHA)
	}
	g.Expect(shas).To(ContainElements(theirs), "no commit by anyone else is lost")
	tip := log[0].SHA

	sync := &uprevv1.Sync{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fleet"}, sync)).To(Succeed())
		syncs := []uprevv1.Sync{*sync}
		g.Expect(fleet.AttachTargets(ctx, k8s, syncs)).To(Succeed())
		sync = &syncs[0]
		g.Expect(sync.Status.Targets).To(ContainElement(HaveField("LastAppliedRevision", "main@sha1:"+tip)))
	}).WithTimeout(3*time.Minute).Should(Succeed(), "the Sync applies the tip")
	var list corev1.ConfigMapList
	g.Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var names []string
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "gen-") {
			names = append(names, cm.Name)
		}
	}
	g.Expect(names).To(HaveLen(objectsPerRevision), "prune removed exactly what left Git")
	g.Expect(names).To(HaveEach(HavePrefix(fmt.Sprintf("gen-%d-", last))))
	var agentCM corev1.ConfigMap
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent"}, &agentCM)).To(Succeed())
	g.Expect(agentCM.Data["image"]).To(HavePrefix(fmt.Sprintf("%s:1.%d.0@sha256:", image, last)))
	final.Stop()
}
