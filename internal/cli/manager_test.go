package cli

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
)

// configMap is a ConfigMap manifest in namespace ns whose key version is
// version.
func configMap(ns, version string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: " + ns + "}\ndata: {version: \"" + version + "\"}\n"
}

// TestManagerHonoursRequests runs the real uprev binary, started as
// config/manager starts it (the bare binary with flags) and then as `uprev
// run`, and shows that it does what reconcile and resume ask: a Sync
// applies a new commit long before its interval, --wait reports the
// outcome, failed or not, and a suspended Sync is not reconciled.
func TestManagerHonoursRequests(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := manager.StartCluster(t)
	const ns = "fleet"
	g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

	git := gitserver.Start(t)
	url := git.InitRepo(t, "fleet", "main", map[string]string{"clusters/prod/app.yaml": configMap(ns, "1")})
	prod := newSync(ns, "prod", "local")
	prod.Spec.Git.URL = url
	broken := newSync(ns, "broken", "local")
	broken.Spec.Git = uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "nope"}}
	auto := newAutomation(ns, "fleet")
	auto.Spec.Git.URL = url
	for _, obj := range []client.Object{prod, broken, auto} {
		g.Expect(c.Client.Create(ctx, obj)).To(Succeed())
	}

	// cli runs the command line against the manager's cluster, with the
	// real clock: each request is a new time.
	cli := func(args ...string) result {
		var stdout, stderr bytes.Buffer
		code := Execute(ctx, append(args, "-n", ns, "--kubeconfig="+c.KubeConfigPath), Options{
			IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr},
			Clock:     clock.RealClock{},
		})
		return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
	}
	appVersion := func(g Gomega) string {
		var cm corev1.ConfigMap
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, &cm)).To(Succeed())
		return cm.Data["version"]
	}

	bin := manager.Build(t)
	storage := t.TempDir()
	mgr := manager.Start(t, bin, c.KubeConfigPath, storage, "--controllers=sync,automation")

	r := cli("reconcile", "sync", "prod", "--wait", "--timeout=2m")
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(r.stdout).To(MatchRegexp(`^sync.uprev.dev/prod reconcile requested\nsync.uprev.dev/prod reconciled: applied main@sha1:[0-9a-f]{40} to 1 targets\n$`))
	g.Expect(appVersion(g)).To(Equal("1"))

	// The automation's first run is over before the next commit, so that
	// the run requested below finds that commit new and rewrites (a first
	// run slowed past the commit, on a loaded machine, left the requested
	// run nothing new: "no change: nothing new since ...").
	g.Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(auto), auto)).To(Succeed())
		g.Expect(conditions.IsReady(auto)).To(BeTrue(), "%v", auto.Status.Conditions)
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())

	// A new commit, applied now although the interval is an hour.
	git.CommitFile(t, "fleet", "main", "clusters/prod/app.yaml", configMap(ns, "2"), "Version 2")
	r = cli("reconcile", "sync", "prod", "--wait", "--timeout=2m")
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(appVersion(g)).To(Equal("2"))

	r = cli("reconcile", "automation", "fleet", "--wait", "--timeout=2m")
	g.Expect(r).To(Equal(result{stdout: "updateautomation.uprev.dev/fleet reconcile requested\nupdateautomation.uprev.dev/fleet reconciled: no change\n"}))

	r = cli("reconcile", "sync", "broken", "--wait", "--timeout=2m")
	g.Expect(r.code).To(Equal(1))
	g.Expect(r.stdout).To(Equal("sync.uprev.dev/broken reconcile requested\n"))
	g.Expect(r.stderr).To(HavePrefix("uprev reconcile sync: sync.uprev.dev/broken is not ready: "))
	g.Expect(r.stderr).To(ContainSubstring("nope"))

	// Suspended, the Sync is not reconciled, and reconcile says why.
	r = cli("suspend", "sync", "prod")
	g.Expect(r).To(Equal(result{stdout: "sync.uprev.dev/prod suspended\n"}))
	r = cli("reconcile", "sync", "prod")
	g.Expect(r.code).To(Equal(1))
	g.Expect(r.stderr).To(ContainSubstring("is suspended"))
	mgr.Stop()

	// `uprev run` is the same manager; resume reconciles at once.
	mgr = manager.Start(t, bin, c.KubeConfigPath, storage, "run", "--controllers=sync")
	git.CommitFile(t, "fleet", "main", "clusters/prod/app.yaml", configMap(ns, "3"), "Version 3")
	r = cli("resume", "sync", "prod", "--wait", "--timeout=2m")
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(r.stdout).To(MatchRegexp(`^sync.uprev.dev/prod resumed\nsync.uprev.dev/prod reconciled: applied main@sha1:[0-9a-f]{40} to 1 targets\n$`))
	g.Expect(appVersion(g)).To(Equal("3"))
	g.Expect(mgr.Logs(t)).To(ContainSubstring(`"msg":"Starting manager"`))
	g.Expect(mgr.Logs(t)).To(ContainSubstring(`"msg":"Warning: running without the multi-tenant lockdown`), "started without the lockdown flags")

	var s uprevv1.Sync
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(prod), &s)).To(Succeed())
	g.Expect(s.Spec.Interval.Duration).To(Equal(time.Hour), "what ran was the request, not the interval")
}
