package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/go-git/go-git/v5"
	. "github.com/onsi/gomega"
)

// TestRejectSignsAsGitIsConfigured: `uprev reject` makes its commit with
// the user's git, so a checkout whose Git configuration asks for signed
// commits (commit.gpgSign, gpg.format ssh, user.signingKey: here an SSH
// key made for the test) gets a commit signed with that key, which git
// verifies; --sign signs without commit.gpgSign; and a configuration that
// asks for signing without a key fails with git's words, no commit made.
func TestRejectSignsAsGitIsConfigured(t *testing.T) {
	g := NewWithT(t)
	// Only the checkout's own configuration counts, not this machine's.
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	ns := newNamespace(t)
	g.Expect(k8s.Create(t.Context(), newPolicy(ns, "agent", meta.NamespacedObjectReference{Name: "agent"}))).To(Succeed())
	createWithStatus(t, newAutomation(ns, "fleet"))
	dir, repo := newCheckout(t)
	key := filepath.Join(t.TempDir(), "id_ed25519")
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s %v: %s", name, args, out)
		return strings.TrimSpace(string(out))
	}
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f", key)
	pub, err := os.ReadFile(key + ".pub")
	g.Expect(err).NotTo(HaveOccurred())
	signers := filepath.Join(t.TempDir(), "allowed_signers")
	g.Expect(os.WriteFile(signers, []byte("alice@example.com "+string(pub)), 0o600)).To(Succeed())
	gitC := func(args ...string) string { t.Helper(); return run("git", append([]string{"-C", dir}, args...)...) }
	gitC("config", "gpg.format", "ssh")
	gitC("config", "user.signingKey", key)
	gitC("config", "commit.gpgSign", "true")
	// signedBy checks that the checkout's tip is the rejection of version,
	// signed with the test's key as git verifies it.
	signedBy := func(version string) {
		t.Helper()
		head, err := repo.Head()
		g.Expect(err).NotTo(HaveOccurred())
		commit, err := repo.CommitObject(head.Hash())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(commit.Message).To(HavePrefix("Reject " + ns + "/agent " + version + "\n"))
		g.Expect(commit.PGPSignature).To(HavePrefix("-----BEGIN SSH SIGNATURE-----"))
		out := gitC("-c", "gpg.ssh.allowedSignersFile="+signers, "verify-commit", "--raw", head.Hash().String())
		g.Expect(out).To(ContainSubstring(`Good "git" signature for alice@example.com with ED25519 key`))
	}

	r := uprev(t, "reject", "fleet", "agent", "1.5.0", "--reason", "crashes", "--checkout", dir, "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	signedBy("1.5.0")
	w, err := repo.Worktree()
	g.Expect(err).NotTo(HaveOccurred())
	st, err := w.Status()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.File("agent.yaml").Staging).To(Equal(git.Modified), "what is staged stays staged")

	gitC("config", "commit.gpgSign", "false")
	r = uprev(t, "reject", "fleet", "agent", "1.6.0", "--reason", "crashes too", "--sign", "--checkout", dir, "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	signedBy("1.6.0")

	gitC("config", "commit.gpgSign", "true")
	gitC("config", "--unset", "user.signingKey")
	before := gitC("rev-parse", "HEAD")
	r = uprev(t, "reject", "fleet", "agent", "1.7.0", "--reason", "r", "--checkout", dir, "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(1))
	g.Expect(r.stderr).To(HavePrefix("uprev reject: recording the rejection in " + dir + ": git commit: "))
	g.Expect(r.stderr).To(ContainSubstring("user.signingkey"), "git says which key is missing")
	g.Expect(gitC("rev-parse", "HEAD")).To(Equal(before), "no commit")
}
