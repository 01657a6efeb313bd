package controllers

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
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
