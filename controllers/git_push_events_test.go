package controllers

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// agentConfigMap is apps/agent.yaml of the push tests: a ConfigMap whose
// value follows the policy agent.
const agentConfigMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: agent\n  namespace: NS\n" +
	"data:\n  image: IMAGE:VERSION # {\"$imagepolicy\": \"NS:agent\"}\n"

// TestPushMakesSyncsOfTheRepositoryApplyAtOnce checks the in-process push
// notice across spellings of one repository URL: an automation writing to
// …/fleet.git pushes, and a Sync reading …/fleet (every hour) applies the
// pushed commit at once.
func TestPushMakesSyncsOfTheRepositoryApplyAtOnce(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{"apps/agent.yaml": withVersion(agentConfigMap, "1.0.0")})
	g.Expect(f.url).To(HaveSuffix("/fleet.git"))
	s := newSync(t, f.ns, strings.TrimSuffix(f.url, ".git"), "apps")
	waitApplied(t, s, f.tip("main"), "local")

	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.1.0")
	auto := newAutomation(t, f.ns, f.url)
	pushed := waitForPush(t, auto, "")
	waitApplied(t, s, pushed, "local")
	var cm corev1.ConfigMap
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "agent"}, &cm)).To(Succeed())
	g.Expect(cm.Data["image"]).To(Equal(f.image + ":1.1.0"))
}
