package controllers

import (
	"context"
	"testing"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	testproxy "github.com/uprev-dev/uprev/internal/testenv/proxy"
)

// TestImageUpdateAutomationUsesTheGitRepositoryProxy: a Flux automation
// reaches Git through the proxy its GitRepository names, with the proxy's
// credentials.
func TestImageUpdateAutomationUsesTheGitRepositoryProxy(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{
		"clusters/my-cluster/agent.yaml": agentDeployment,
	}, gitserver.WithBasicAuth("flux", "s3cret"))
	proxy := testproxy.Start(t, "proxy-bot", "proxy-pa55")
	g.Expect(k8s.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "proxy"},
		StringData: map[string]string{"address": proxy.URL, "username": "proxy-bot", "password": "proxy-pa55"},
	})).To(Succeed())
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.1.0")
	f.fluxSource(func(r *sourcev1.GitRepository) { r.Spec.ProxySecretRef = &meta.LocalObjectReference{Name: "proxy"} })
	auto := f.fluxAutomation()

	st := waitForFluxPush(t, auto, "")
	g.Expect(f.tip("main")).To(Equal(st.LastPushCommit))
	g.Expect(proxy.Forwarded()).To(BeNumerically(">=", 2), "the fetch and the push went through the proxy")
}

func TestFluxAutomationReadsTheGitRepository(t *testing.T) {
	useCluster(t)
	repo := func(ref *sourcev1.GitRepositoryRef) *sourcev1.GitRepository {
		return &sourcev1.GitRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: "sources", Name: "fleet"},
			Spec:       sourcev1.GitRepositorySpec{URL: "https://git.example.com/fleet.git", SecretRef: &meta.LocalObjectReference{Name: "git"}, Reference: ref},
		}
	}
	automation := func(mutate func(*iacv1.ImageUpdateAutomation)) *iacv1.ImageUpdateAutomation {
		a := &iacv1.ImageUpdateAutomation{}
		if err := yaml.UnmarshalStrict([]byte(fluxImageUpdateAutomation), a); err != nil {
			t.Fatal(err)
		}
		a.Namespace = "apps"
		if mutate != nil {
			mutate(a)
		}
		return a
	}
	t.Run("as Flux's docs write it", func(t *testing.T) {
		g := NewWithT(t)
		run, err := fluxAutomation(automation(nil), repo(nil))
		g.Expect(err).NotTo(HaveOccurred())
		spec := run.auto.Spec
		g.Expect(spec.Git.URL).To(Equal("https://git.example.com/fleet.git"))
		g.Expect(spec.Git.SecretRef.Name).To(Equal("git"))
		g.Expect(run.front.gitSecretNamespace).To(Equal("sources"), "the Secret is the GitRepository's")
		g.Expect(spec.Git.Ref.Branch).To(Equal("main"))
		g.Expect(spec.Git.Push).To(BeNil(), "push.branch main is the checkout branch")
		g.Expect(spec.Update.Path).To(Equal("./clusters/my-cluster"))
		g.Expect(spec.Git.Commit.Author).To(Equal(uprevv1.CommitUser{Name: "fluxcdbot", Email: "fluxcdbot@users.noreply.github.com"}))
	})
	t.Run("checkout falls back to the GitRepository's ref, then to master", func(t *testing.T) {
		g := NewWithT(t)
		noCheckout := automation(func(a *iacv1.ImageUpdateAutomation) { a.Spec.GitSpec.Checkout = nil; a.Spec.GitSpec.Push = nil })
		run, err := fluxAutomation(noCheckout, repo(&sourcev1.GitRepositoryRef{Branch: "release"}))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(run.auto.Spec.Git.Ref.Branch).To(Equal("release"))
		g.Expect(run.auto.PushBranch()).To(Equal("release"))
		run, err = fluxAutomation(noCheckout, repo(nil))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(run.auto.Spec.Git.Ref.Branch).To(Equal("master"))
		_, err = fluxAutomation(noCheckout, repo(&sourcev1.GitRepositoryRef{SemVer: "1.x"}))
		g.Expect(err).To(MatchError(ContainSubstring("GitRepository sources/fleet spec.ref: uprev checks out only a branch")))
	})
	t.Run("signing key type", func(t *testing.T) {
		g := NewWithT(t)
		for keyType, want := range map[iacv1.SigningKeyType]string{"": "gpg", "gpg": "gpg", "ssh": "ssh"} {
			run, err := fluxAutomation(automation(func(a *iacv1.ImageUpdateAutomation) {
				a.Spec.GitSpec.Commit.SigningKey = &iacv1.SigningKey{SecretRef: meta.LocalObjectReference{Name: "sign"}, Type: keyType}
			}), repo(nil))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(run.front.signingKeyType).To(Equal(want))
			g.Expect(run.auto.Spec.Git.Commit.SigningKey.SecretRef.Name).To(Equal("sign"))
		}
	})
	t.Run("refspec", func(t *testing.T) {
		g := NewWithT(t)
		for refspec, want := range map[string]string{
			"refs/heads/main:refs/for/main": "refs/for/main",
			"main:mirror":                   "refs/heads/mirror",
			"HEAD:refs/heads/mirror":        "refs/heads/mirror",
			"refs/heads/main":               "",
		} {
			got, err := refspecTarget(refspec, "main")
			g.Expect(err).NotTo(HaveOccurred(), refspec)
			g.Expect(got).To(Equal(want), refspec)
		}
		for _, refspec := range []string{"refs/heads/other:refs/for/main", "main:", "main:+x"} {
			_, err := refspecTarget(refspec, "main")
			g.Expect(err).To(HaveOccurred(), refspec)
		}
	})
	t.Run("unsupported provider", func(t *testing.T) {
		g := NewWithT(t)
		r := repo(nil)
		r.Spec.Provider = "azure"
		_, err := fluxAutomation(automation(nil), r)
		g.Expect(err).To(MatchError(ContainSubstring(`provider "azure" is not supported by uprev for Git`)))
	})
}

func TestImageUpdateAutomationFollowsItsGitRepository(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{"clusters/my-cluster/agent.yaml": agentDeployment},
		gitserver.WithBasicAuth("flux", "s3cret"))
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.0.0")
	// Stalled: not retried until something changes.
	f.fluxSource(func(r *sourcev1.GitRepository) { r.Spec.Provider = "azure" })
	auto := f.fluxAutomation()
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsStalled(getFluxAutomation(g, auto))).To(BeTrue())
	}).Should(Succeed())

	// Fixing the GitRepository runs the automation at once: it is not
	// retried, its interval is 30 minutes, and no run was requested.
	repo := &sourcev1.GitRepository{}
	g.Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "flux-system"}, repo); err != nil {
			return err
		}
		repo.Spec.Provider = sourcev1.GitProviderGeneric
		return k8s.Update(context.Background(), repo)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsReady(getFluxAutomation(g, auto))).To(BeTrue(), conditions.GetMessage(auto, meta.ReadyCondition))
		g.Expect(auto.Status.ObservedSourceRevision).To(Equal("main@sha1:" + f.tip("main")))
	}).Should(Succeed())
}
