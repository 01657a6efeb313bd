package cli

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// complete runs cobra's hidden __complete command, as the shell scripts of
// `uprev completion` do, for the command line args whose last word is
// being typed; it returns the completions and cobra's directive line.
func complete(t *testing.T, args ...string) (completions []string, directive string) {
	t.Helper()
	r := uprev(t, append([]string{"__complete"}, args...)...)
	if r.code != 0 {
		t.Fatalf("__complete %v exited %d: %s", args, r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// TestCompleteNames shows that shell completion knows the names of the
// objects of the kind typed, in the namespace of -n: for get's nouns (holds:
// both kinds of automation), reconcile, suspend, resume and release-hold;
// names already given are not offered again, and -A offers none.
func TestCompleteNames(t *testing.T) {
	ns := newNamespace(t)
	createFleet(t, ns)
	createRepositoriesAndTargets(t, ns)
	const noFiles = ":4" // cobra.ShellCompDirectiveNoFileComp
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{args: []string{"get", "syncs", ""}, want: []string{"prod", "staging"}},
		{args: []string{"get", "sync", "st"}, want: []string{"staging"}},
		{args: []string{"get", "policies", "agent", ""}, want: []string{"kms"}},
		{args: []string{"get", "repositories", ""}, want: []string{"agent", "kms"}},
		{args: []string{"get", "holds", ""}, want: []string{"fleet", "flux-system", "paused"}},
		{args: []string{"get", "imageupdateautomations", ""}, want: []string{"flux-system"}},
		{args: []string{"get", "syncs", "-A", ""}, want: []string{}},
		{args: []string{"reconcile", "sync", ""}, want: []string{"prod", "staging"}},
		{args: []string{"reconcile", "policy", "k"}, want: []string{"kms"}},
		{args: []string{"suspend", "automation", "fleet", ""}, want: []string{"paused"}},
		{args: []string{"resume", "imagerepository", ""}, want: []string{"agent", "kms"}},
		{args: []string{"release-hold", ""}, want: []string{"fleet", "flux-system", "paused"}},
		{args: []string{"release-hold", "fleet", ""}, want: []string{}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			args := append([]string{tc.args[0], "-n", ns, kubeconfigFlag}, tc.args[1:]...)
			completions, directive := complete(t, args...)
			g.Expect(completions).To(Equal(tc.want))
			g.Expect(directive).To(Equal(noFiles))
		})
	}

	t.Run("unreachable cluster", func(t *testing.T) {
		g := NewWithT(t)
		completions, directive := complete(t, "get", "syncs", "--server=https://127.0.0.1:1", "")
		g.Expect(completions).To(BeEmpty())
		g.Expect(directive).To(Equal(":1"), "cobra.ShellCompDirectiveError")
	})
}

// TestCompleteNamespaces shows that -n/--namespace completes to the
// cluster's namespaces, on every command that reads the cluster.
func TestCompleteNamespaces(t *testing.T) {
	ns := newNamespace(t)
	other := createNamespace(t, ns+"-other")
	for _, args := range [][]string{
		{"get", "syncs", kubeconfigFlag, "-n", ns},
		{"get", kubeconfigFlag, "--namespace", ns},
		{"reconcile", "sync", kubeconfigFlag, "-n", ns},
		{"suspend", "automation", kubeconfigFlag, "-n", ns},
		{"release-hold", kubeconfigFlag, "-n", ns},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			g := NewWithT(t)
			completions, directive := complete(t, args...)
			g.Expect(completions).To(Equal([]string{ns, other}))
			g.Expect(directive).To(Equal(":4"))
		})
	}
}
