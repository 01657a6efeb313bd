package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// pendingUpdate makes a fixture where agent 1.0.0 in Git is behind the
// policy's 1.1.0, so that the automation pushes as soon as it can.
func pendingUpdate(t *testing.T, gitOpts ...gitserver.Option) *automationFixture {
	t.Helper()
	f := newAutomationFixture(t, []string{"1.0.0", "1.1.0"}, map[string]string{"apps/agent.yaml": withVersion(agentMarked, "1.0.0")}, gitOpts...)
	waitForLatestTag(t, newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0")), "1.1.0")
	return f
}

// withSigningKey makes the automation sign with the key in Secret name.
func withSigningKey(name string) func(*uprevv1.UpdateAutomation) {
	return func(a *uprevv1.UpdateAutomation) {
		a.Spec.Git.Commit.SigningKey = &uprevv1.SigningKey{SecretRef: meta.LocalObjectReference{Name: name}}
	}
}

// verifyCommit runs `git verify-commit -v` on a clone of the fleet
// repository with config and env, and returns its output.
func (f *automationFixture) verifyCommit(sha string, env []string, config ...string) (string, error) {
	f.t.Helper()
	clone := f.git.Clone(f.t, fleetRepo)
	args := append(config, "verify-commit", "-v", sha)
	return runTool(f.t, clone, env, "git", args...)
}

// runTool runs a tool the test checks results with, isolated from the
// user's configuration, and returns its combined output.
func runTool(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("this test needs %s on PATH (apt-get install git gnupg openssh-client): %v", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return strings.TrimSpace(out.String()), err
}

func TestAutomationSignsCommitsWithOpenPGP(t *testing.T) {
	g := NewWithT(t)
	entity, err := openpgp.NewEntity(botName, "", botEmail, &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	g.Expect(err).NotTo(HaveOccurred())
	public := armored(g, openpgp.PublicKeyType, entity.Serialize)
	g.Expect(entity.EncryptPrivateKeys([]byte("open sesame"), nil)).To(Succeed())
	private := armored(g, openpgp.PrivateKeyType, func(w io.Writer) error { return entity.SerializePrivateWithoutSigning(w, nil) })

	f := pendingUpdate(t)
	g.Expect(k8s.Create(context.Background(), secretWith(f.ns, "signing", map[string][]byte{
		"git.asc": private, "passphrase": []byte("open sesame"),
	}))).To(Succeed())
	auto := newAutomation(t, f.ns, f.url, withSigningKey("signing"))
	sha := waitForPush(t, auto, "")

	gnupg, err := os.MkdirTemp("", "gpg-")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = os.RemoveAll(gnupg) })
	env := []string{"GNUPGHOME=" + gnupg}
	g.Expect(os.WriteFile(filepath.Join(gnupg, "bot.asc"), public, 0o600)).To(Succeed())
	out, err := runTool(t, gnupg, env, "gpg", "--batch", "--import", filepath.Join(gnupg, "bot.asc"))
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = f.verifyCommit(sha, env)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`Good signature from "` + botName + ` <` + botEmail + `>"`))
	g.Expect(f.readFile("main", "apps/agent.yaml")).To(ContainSubstring(":1.1.0 #"))
}

func TestAutomationSignsCommitsWithSSH(t *testing.T) {
	g := NewWithT(t)
	f := pendingUpdate(t)
	// The Git server's client key doubles as the signing key.
	g.Expect(k8s.Create(context.Background(), secretWith(f.ns, "signing", map[string][]byte{"identity": f.git.ClientKeyPEM()}))).To(Succeed())
	auto := newAutomation(t, f.ns, f.url, withSigningKey("signing"))
	sha := waitForPush(t, auto, "")

	allowed := filepath.Join(t.TempDir(), "allowed_signers")
	g.Expect(os.WriteFile(allowed, []byte(botEmail+" "+string(ssh.MarshalAuthorizedKey(f.git.ClientPublicKey()))), 0o600)).To(Succeed())
	out, err := f.verifyCommit(sha, nil, "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+allowed)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`Good "git" signature for ` + botEmail))

	// Another key does not verify it.
	other := gitserver.Start(t)
	g.Expect(os.WriteFile(allowed, []byte(botEmail+" "+string(ssh.MarshalAuthorizedKey(other.ClientPublicKey()))), 0o600)).To(Succeed())
	out, err = f.verifyCommit(sha, nil, "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+allowed)
	g.Expect(err).To(HaveOccurred(), out)
}

func TestWrongGitPasswordIsReportedAndNeverShown(t *testing.T) {
	g := NewWithT(t)
	const password, wrong = "correct-horse-42", "wrong-battery-17"
	f := pendingUpdate(t, gitserver.WithBasicAuth("uprev", password))
	ctx := context.Background()
	secret := secretWith(f.ns, "git", map[string][]byte{"username": []byte("uprev"), "password": []byte(wrong)})
	g.Expect(k8s.Create(ctx, secret)).To(Succeed())
	base := f.tip("main")

	auto := newAutomation(t, f.ns, f.url, withSecret("git"))
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, auto)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.AuthenticationFailedReason))
		g.Expect(conditions.IsReconciling(auto)).To(BeTrue(), "retried with backoff")
		g.Expect(conditions.IsStalled(auto)).To(BeFalse())
	}).Should(Succeed())
	g.Expect(f.git.Counts().ReceivePack).To(BeZero(), "nothing pushed")
	g.Expect(f.tip("main")).To(Equal(base))
	g.Expect(auto.Status.LastPushCommit).To(BeEmpty())

	status, err := json.Marshal(auto.Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring(wrong))
	g.Eventually(func(g Gomega) {
		notes := eventNotes(automationEvents(g, f.ns, auto.Name))
		g.Expect(notes).To(ContainElement(HavePrefix("Warning " + uprevv1.AuthenticationFailedReason + ": ")))
		g.Expect(strings.Join(notes, "\n")).NotTo(ContainSubstring(wrong))
	}).Should(Succeed())

	// With the right password the pending update goes out.
	secret.Data["password"] = []byte(password)
	g.Expect(k8s.Update(ctx, secret)).To(Succeed())
	requestReconcile(t, auto)
	sha := waitForPush(t, auto, "")
	g.Expect(f.tip("main")).To(Equal(sha))
	status, err = json.Marshal(getAutomation(g, auto).Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring(password))
	g.Expect(strings.Join(eventNotes(automationEvents(g, f.ns, auto.Name)), "\n")).NotTo(Or(ContainSubstring(password), ContainSubstring(wrong)))
}

func TestAutomationPushesOverSSH(t *testing.T) {
	g := NewWithT(t)
	f := pendingUpdate(t)
	ctx := context.Background()
	stranger := gitserver.Start(t)
	secret := secretWith(f.ns, "git-ssh", map[string][]byte{"identity": f.git.ClientKeyPEM(), "known_hosts": stranger.KnownHosts()})
	g.Expect(k8s.Create(ctx, secret)).To(Succeed())
	base := f.tip("main")

	// A host key that known_hosts does not list is refused.
	auto := newAutomation(t, f.ns, f.git.SSHURL(fleetRepo), withSecret("git-ssh"))
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, auto)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.AuthenticationFailedReason))
		g.Expect(c.Message).To(ContainSubstring("host key"))
	}).Should(Succeed())
	g.Expect(f.tip("main")).To(Equal(base))

	secret.Data["known_hosts"] = f.git.KnownHosts()
	g.Expect(k8s.Update(ctx, secret)).To(Succeed())
	requestReconcile(t, auto)
	sha := waitForPush(t, auto, "")
	g.Expect(f.tip("main")).To(Equal(sha))
	g.Expect(f.readFile("main", "apps/agent.yaml")).To(Equal(f.expand(withVersion(agentMarked, "1.1.0"))))
	g.Expect(f.git.Counts().ReceivePack).To(BeNumerically(">=", 1), "pushed over SSH")
	st := waitForReady(t, auto)
	g.Expect(st.LastPushCommit).To(Equal(sha))
	g.Expect(string(mustJSON(g, st))).NotTo(ContainSubstring("PRIVATE KEY"))
}

// mustJSON marshals v.
func mustJSON(g Gomega, v any) []byte {
	b, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	return b
}

// armored returns what serialize writes, in ASCII armor of blockType.
func armored(g Gomega, blockType string, serialize func(w io.Writer) error) []byte {
	var b bytes.Buffer
	w, err := armor.Encode(&b, blockType, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(serialize(w)).To(Succeed())
	g.Expect(w.Close()).To(Succeed())
	return b.Bytes()
}

func TestMissingGitSecretHasItsOwnReason(t *testing.T) {
	g := NewWithT(t)
	f := pendingUpdate(t)
	auto := newAutomation(t, f.ns, f.url, withSecret("not-created-yet"))
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, auto)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.SecretNotFoundReason))
		g.Expect(c.Message).To(ContainSubstring("not-created-yet"))
		g.Expect(conditions.IsStalled(auto)).To(BeFalse(), "retried until the Secret appears")
	}).Should(Succeed())
}
