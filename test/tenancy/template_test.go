package tenancy

import (
	"context"
	"strings"
	"testing"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// maxTemplateAttackRSSMiB bounds the manager's peak RSS while a tenant's
// template asks for 300 MB (Flux would push a 286 MiB commit at 2.2 GiB).
const maxTemplateAttackRSSMiB = 200

// TestHostileMessageTemplateStallsWithinBoundedMemory: an
// ImageUpdateAutomation whose message template is
// `{{ repeat 300000000 "a" }}`, with an update to write, is Stalled saying
// which bound it passed; nothing is pushed and the manager's peak RSS
// stays small.
func TestHostileMessageTemplateStallsWithinBoundedMemory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "template")
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	g.Expect(k8s.Create(ctx, &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: reg.Image("acme/agent"), Interval: metav1.Duration{Duration: time.Hour}},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Name: "agent"},
			Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
		},
	})).To(Succeed())

	git := gitserver.Start(t)
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: agent\nspec:\n  containers:\n  - name: agent\n    image: " +
		reg.Image("acme/agent") + `:1.0.0 # {"$imagepolicy": "` + ns + `:agent"}` + "\n"
	url := git.InitRepo(t, "fleet", "main", map[string]string{"agent.yaml": manifest})
	g.Expect(k8s.Create(ctx, &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: sourcev1.GitRepositorySpec{URL: url, Interval: metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"}},
	})).To(Succeed())
	auto := &iacv1.ImageUpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "repeat"},
		Spec: iacv1.ImageUpdateAutomationSpec{
			SourceRef: iacv1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: "fleet"},
			Interval:  metav1.Duration{Duration: time.Hour},
			GitSpec: &iacv1.GitSpec{
				Checkout: &iacv1.GitCheckoutSpec{Reference: sourcev1.GitRepositoryRef{Branch: "main"}},
				Commit: iacv1.CommitSpec{Author: iacv1.CommitUser{Name: "tenant", Email: "tenant@example.com"},
					MessageTemplate: `{{ repeat 300000000 "a" }}`},
				Push: &iacv1.PushSpec{Branch: "main"},
			},
			Update: &iacv1.UpdateStrategy{Strategy: iacv1.UpdateStrategySetters, Path: "./"},
		},
	}
	g.Expect(k8s.Create(ctx, auto)).To(Succeed())
	mgr := startManager(t)

	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(auto), auto)).To(Succeed())
		stalled := apimeta.FindStatusCondition(auto.Status.Conditions, meta.StalledCondition)
		g.Expect(stalled).NotTo(BeNil(), "Stalled")
		g.Expect(stalled.Message).To(ContainSubstring("commit message template exceeds a bound: repeat of more than 65536 bytes"))
	}).Should(Succeed())
	_, hwm := memoryOf(t, mgr)
	t.Logf("manager's peak RSS: %d MiB", hwm>>10)
	g.Expect(hwm>>10).To(BeNumerically("<", maxTemplateAttackRSSMiB), "peak RSS in MiB")
	log := git.Git(t, "fleet", "log", "--format=%s", "main")
	g.Expect(strings.Split(log, "\n")).To(HaveLen(1), "nothing pushed")
}
