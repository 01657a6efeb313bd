package cli

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uprev-dev/uprev/internal/version"
)

// TestHelp shows that `uprev -h` exits 0 and lists every command, the
// manager's flags staying out of it, and that each command has help.
func TestHelp(t *testing.T) {
	g := NewWithT(t)
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		r := uprev(t, args...)
		g.Expect(r.code).To(Equal(0), "uprev %v: %s", args, r.stderr)
		g.Expect(r.stderr).To(BeEmpty())
		for _, cmd := range []string{"run", "version", "plan", "get", "reconcile", "suspend", "resume", "release-hold", "dashboard", "completion"} {
			g.Expect(r.stdout).To(MatchRegexp(`(?m)^  `+cmd+` +\S`), "uprev %v lists %s", args, cmd)
		}
		g.Expect(r.stdout).NotTo(ContainSubstring("--controllers"), "the manager's flags are under `uprev run -h`")
	}

	r := uprev(t)
	g.Expect(r.code).To(Equal(0), "bare uprev prints its help and starts no manager: %s", r.stderr)
	g.Expect(r.stdout).To(MatchRegexp(`(?m)^  run +\S`))
	g.Expect(r.stdout).To(ContainSubstring("The manager is 'uprev run'"))

	r = uprev(t, "run", "-h")
	g.Expect(r.code).To(Equal(0))
	for _, flag := range []string{"--controllers", "--storage-path", "--enable-leader-election", "--log-level", "--webhook-addr", "--no-cross-namespace-refs", "--default-service-account"} {
		g.Expect(r.stdout).To(ContainSubstring(flag))
	}

	r = uprev(t, "get", "-h")
	g.Expect(r.code).To(Equal(0))
	for _, noun := range []string{"policies", "automations", "syncs", "holds"} {
		g.Expect(r.stdout).To(MatchRegexp(`(?m)^  ` + noun + ` +\S`))
	}
	for _, flag := range []string{"-A, --all-namespaces", "-n, --namespace", "-o, --output", "--kubeconfig", "--context"} {
		g.Expect(r.stdout).To(ContainSubstring(flag))
	}

	for _, cmd := range []string{"plan", "reconcile", "suspend", "resume", "release-hold", "version"} {
		r := uprev(t, cmd, "--help")
		g.Expect(r.code).To(Equal(0), "uprev %s --help", cmd)
		g.Expect(r.stdout).To(ContainSubstring("uprev " + cmd))
	}
}

// TestVersion shows that `uprev version` prints the version and does not
// start the manager (which would need a cluster and never return).
func TestVersion(t *testing.T) {
	g := NewWithT(t)
	r := uprev(t, "version")
	g.Expect(r).To(Equal(result{stdout: version.Version() + "\n"}))
	g.Expect(version.Version()).NotTo(BeEmpty())
}

// TestCompletion shows that cobra's shell completion comes with the
// command line, and completes the nouns of `uprev get`.
func TestCompletion(t *testing.T) {
	g := NewWithT(t)
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := uprev(t, "completion", shell)
		g.Expect(r.code).To(Equal(0), "completion %s: %s", shell, r.stderr)
		g.Expect(r.stdout).To(ContainSubstring("uprev"))
	}
	r := uprev(t, "__complete", "get", "")
	g.Expect(r.code).To(Equal(0))
	g.Expect(r.stdout).To(ContainSubstring("policies\t"))
	g.Expect(r.stdout).To(ContainSubstring("holds\t"))
}

// TestUsageErrors shows the errors of a command line that is wrong: exit
// code 1 and a message naming the command.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nope"}, `uprev: unknown command "nope" for "uprev"`},
		{[]string{"--nope"}, "uprev: unknown flag: --nope\nSee 'uprev --help' for usage\n"},
		{[]string{"version", "extra"}, `uprev version: unknown command "extra" for "uprev version"`},
		{[]string{"get"}, "uprev get: a noun is required: policies, repositories, automations, imageupdateautomations, syncs, synctargets, holds, gates or sources\n"},
		{[]string{"get", "clusters"}, "uprev get: unknown noun \"clusters\": want policies, repositories, automations, imageupdateautomations, syncs, synctargets, holds, gates or sources\n"},
		{[]string{"get", "polices"}, "uprev get: unknown noun \"polices\": want policies, repositories, automations, imageupdateautomations, syncs, synctargets, holds, gates or sources (did you mean policies?)\n"},
		{[]string{"get", "syncs", "-o", "table", kubeconfigFlag}, "uprev get syncs: unknown output format \"table\": want wide, yaml, json, name, jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=SPEC or custom-columns-file=FILE\n"},
		{[]string{"get", "syncs", "prod", "-A", kubeconfigFlag}, "uprev get syncs: names cannot be looked up across all namespaces (-A); give a namespace with -n\n"},
		{[]string{"reconcile"}, "uprev reconcile: a kind is required: automation, sync, repository, policy, source, gate or imageupdateautomation\n"},
		{[]string{"reconcile", "deployment", "x"}, "uprev reconcile: unknown kind \"deployment\": want automation, sync, repository, policy, source, gate or imageupdateautomation\n"},
		{[]string{"suspend", "sync"}, "uprev suspend sync: requires at least 1 arg(s), only received 0\n"},
		{[]string{"release-hold"}, "uprev release-hold: accepts between 1 and 3 arg(s), received 0\n"},
		{[]string{"get", "syncs", kubeconfigFlag + "-missing"}, "uprev get syncs: reading kubeconfig: "},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			r := uprev(t, tc.args...)
			g.Expect(r.code).To(Equal(1))
			g.Expect(r.stdout).To(BeEmpty())
			g.Expect(r.stderr).To(HavePrefix(tc.want))
		})
	}
}

// TestVersionServer shows `uprev version --manager`: the image each manager
// Pod runs, as text and as JSON.
func TestVersionServer(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	pod := func(name string, labels map[string]string, image string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: image}}},
		}
	}
	manager := map[string]string{"app.kubernetes.io/name": "uprev", "app.kubernetes.io/component": "manager"}
	running := pod("uprev-7d9f", manager, "ghcr.io/uprev-dev/uprev:v1.2.3")
	g.Expect(k8s.Create(t.Context(), running)).To(Succeed())
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "manager", Image: "ghcr.io/uprev-dev/uprev:v1.2.3", ImageID: "ghcr.io/uprev-dev/uprev@" + agentDigest}}
	g.Expect(k8s.Status().Update(t.Context(), running)).To(Succeed())
	g.Expect(k8s.Create(t.Context(), pod("other", map[string]string{"app.kubernetes.io/name": "other"}, "example.com/other:1"))).To(Succeed())

	r := uprev(t, "version", "--manager", "--manager-namespace", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "Client: " + version.Version() + "\nServer: ghcr.io/uprev-dev/uprev:v1.2.3 (Pod uprev-7d9f, ghcr.io/uprev-dev/uprev@" + agentDigest + ")\n"}))

	r = uprev(t, "version", "--manager", "-o", "json", "--manager-namespace", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(r.stdout).To(MatchJSON(`{"clientVersion": "` + version.Version() + `", "servers": [{"pod": "uprev-7d9f", "image": "ghcr.io/uprev-dev/uprev:v1.2.3", "imageID": "ghcr.io/uprev-dev/uprev@` + agentDigest + `"}]}`))

	r = uprev(t, "version", "-o", "json")
	g.Expect(r.stdout).To(MatchJSON(`{"clientVersion": "`+version.Version()+`"}`), "without --manager, no cluster is read")

	r = uprev(t, "version", "--manager", "--manager-namespace", "nowhere", kubeconfigFlag)
	g.Expect(r.stdout).To(HaveSuffix("Server: no manager Pod in namespace nowhere\n"))
}
