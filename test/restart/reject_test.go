package restart

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// TestRejectionIsNeverWrittenAndSurvivesARestart runs the uprev binary:
// `uprev reject` records a rejection of agent 1.1.0 in a clone, which a
// person pushes; the manager then never writes 1.1.0, though the policy
// selects it, and reports the hold with its reason; a manager restarted
// with an empty storage (no kept clone, nothing in memory) reads the
// rejection from Git again and still writes nothing; `uprev get holds`
// shows the reason; `uprev release-hold` lifts the rejection and the
// version is written.
func TestRejectionIsNeverWrittenAndSurvivesARestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := manager.StartCluster(t)
	k8s := c.Client
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	image := reg.Image("acme/agent")
	srv := gitserver.Start(t)
	const ns, reason = "fleet", "crashes on arm64, see #412"
	url := srv.InitRepo(t, "fleet", "main", map[string]string{
		"apps/agent.yaml": "image: " + image + ":1.0.0 # {\"$imagepolicy\": \"" + ns + ":agent\"}\n",
	})
	bin := manager.Build(t)
	uprev := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(args, "-n", ns, "--kubeconfig", c.KubeConfigPath)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("uprev %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}

	createAgent(t, k8s, image)
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Suspend:  true,
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
			},
		},
	}
	g.Expect(k8s.Create(ctx, auto)).To(Succeed())

	// A person rejects 1.1.0 in a clone and pushes the commit.
	clone := srv.Clone(t, "fleet")
	gitserver.RunGit(t, clone, "config", "user.name", "Alice")
	gitserver.RunGit(t, clone, "config", "user.email", "alice@example.com")
	g.Expect(uprev("reject", "fleet", "agent", "1.1.0", "--reason", reason, "--checkout", clone)).To(
		HavePrefix("updateautomation.uprev.dev/fleet: rejected " + ns + "/agent 1.1.0 in commit "))
	gitserver.RunGit(t, clone, "push", "--quiet", "origin", "main")
	rejection := gitserver.RunGit(t, clone, "rev-parse", "HEAD")
	g.Expect(uprev("resume", "automation", "fleet")).To(ContainSubstring("fleet"))

	held := uprevv1.Hold{Policy: ns + "/agent", Version: "1.1.0", RevertedIn: rejection, Reason: reason}
	// expectHeld waits until a run that saw the policy at 1.1.0 held it,
	// and checks that Git still has 1.0.0 and nothing new.
	expectHeld := func() {
		t.Helper()
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(auto), auto)).To(Succeed())
			g.Expect(auto.Status.ObservedPolicies).To(HaveKeyWithValue("agent", HaveField("Tag", "1.1.0")))
			g.Expect(auto.Status.Holds).To(Equal([]uprevv1.Hold{held}))
			g.Expect(auto.Status.ObservedSourceRevision).To(Equal("main@sha1:" + rejection))
		}).WithTimeout(time.Minute).Should(Succeed())
		g.Expect(auto.Status.LastPushCommit).To(BeEmpty(), "never written")
		g.Expect(srv.ReadFile(t, "fleet", "main", "apps/agent.yaml")).To(ContainSubstring(image + ":1.0.0"))
		g.Expect(srv.Log(t, "fleet", "main")[0].SHA).To(Equal(rejection))
	}
	first := manager.Start(t, bin, c.KubeConfigPath, t.TempDir(), "--controllers=image,automation")
	expectHeld()
	first.Stop()

	// Restarted, with nothing kept: the rule comes from Git again. The
	// new manager has no tags stored until it scans the repository (its
	// policy waits for them quietly: tagwait_test.go); a user who
	// restarted it asks for the scan, then for the policy, then for the
	// automation, each waited for.
	manager.Start(t, bin, c.KubeConfigPath, t.TempDir(), "--controllers=image,automation")
	g.Expect(uprev("reconcile", "repository", "agent", "--wait")).To(ContainSubstring("2 tags"))
	g.Expect(uprev("reconcile", "policy", "agent", "--wait")).To(ContainSubstring("1.1.0"))
	g.Expect(uprev("reconcile", "automation", "fleet", "--wait")).To(ContainSubstring("1 held"))
	expectHeld()

	g.Expect(uprev("get", "holds", "fleet")).To(MatchRegexp(`(?m)^fleet +UpdateAutomation +` + ns + `/agent +1\.1\.0 +` + rejection[:10] + ` +False +` + reason + `$`))

	g.Expect(uprev("release-hold", "fleet", "agent", "1.1.0")).To(Equal("updateautomation.uprev.dev/fleet released " + ns + "/agent 1.1.0\n"))
	g.Eventually(func() string { return srv.ReadFile(t, "fleet", "main", "apps/agent.yaml") }).WithTimeout(time.Minute).Should(ContainSubstring(image + ":1.1.0"))
}
