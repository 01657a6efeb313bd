package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/tarpit"
)

func TestImageUpdateAutomationUsesTheGitRepositoryTimeout(t *testing.T) {
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{"clusters/my-cluster/agent.yaml": agentDeployment})
	tp := tarpit.Start(t)
	f.fluxSource(func(r *sourcev1.GitRepository) {
		r.Spec.URL = "http://" + tp.Addr() + "/fleet.git"
		r.Spec.Timeout = &metav1.Duration{Duration: time.Second}
	})
	auto := f.fluxAutomation()
	NewWithT(t).Eventually(func(g Gomega) {
		ready := conditions.Get(getFluxAutomation(g, auto), meta.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(uprevv1.GitTimeoutReason))
		g.Expect(ready.Message).To(And(ContainSubstring(tp.Addr()), ContainSubstring("within 1s")))
	}).Should(Succeed())
}

// TestGitHubAppExchangeEndsAtTheGitTimeout: a GitHub App whose API
// (githubAppBaseURL) accepts connections and never answers holds the run no
// longer than spec.git.timeout; the automation is Ready=False with a
// timeout that names the API's host, and is retried.
func TestGitHubAppExchangeEndsAtTheGitTimeout(t *testing.T) {
	g := NewWithT(t)
	app := githubapi.Start(t)
	tp := tarpit.Start(t)
	f := pendingUpdate(t, gitserver.WithBasicAuth("x-access-token", app.Token))
	data := app.SecretData()
	data["githubAppBaseURL"] = []byte("http://" + tp.Addr())
	g.Expect(k8s.Create(context.Background(), secretWith(f.ns, "github-app", data))).To(Succeed())
	auto := newAutomation(t, f.ns, f.url, withSecret("github-app"), func(a *uprevv1.UpdateAutomation) {
		a.Spec.Git.Timeout = &metav1.Duration{Duration: time.Second}
	})
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, auto)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.GitTimeoutReason))
		g.Expect(c.Message).To(And(ContainSubstring(tp.Addr()), ContainSubstring("within 1s")))
		g.Expect(conditions.IsStalled(auto)).To(BeFalse(), "retried with backoff")
	}, 20*time.Second).Should(Succeed())
	g.Expect(tp.Accepted()).To(BeNumerically(">", 0), "the exchange reached the tarpit")
}
