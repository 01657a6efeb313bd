package gitrepo_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// signedWriteBack pushes one commit signed by signer and returns its SHA.
func signedWriteBack(t *testing.T, srv *gitserver.Server, signer *gitrepo.Signer) string {
	t.Helper()
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	s := open(t, newCache(t), remote, "main", "")
	opts := author
	opts.Signer = signer
	sha, err := s.WriteBack(context.Background(), opts, writeFiles(map[string]string{agentPath: "image: ghcr.io/acme/agent:1.4.2\n"}))
	if err != nil {
		t.Fatalf("writing back: %v", err)
	}
	return sha
}

func TestOpenPGPSignedCommitVerifies(t *testing.T) {
	g := NewWithT(t)
	entity, err := openpgp.NewEntity("uprev", "", "uprev@example.com", nil)
	g.Expect(err).NotTo(HaveOccurred())
	var public bytes.Buffer
	w, err := armor.Encode(&public, openpgp.PublicKeyType, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entity.Serialize(w)).To(Succeed())
	g.Expect(w.Close()).To(Succeed())
	g.Expect(entity.EncryptPrivateKeys([]byte("pass phrase"), nil)).To(Succeed())
	var private bytes.Buffer
	w, err = armor.Encode(&private, openpgp.PrivateKeyType, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entity.SerializePrivateWithoutSigning(w, nil)).To(Succeed())
	g.Expect(w.Close()).To(Succeed())

	_, err = gitrepo.NewSigner(map[string][]byte{"git.asc": private.Bytes()})
	g.Expect(err).To(MatchError(gitrepo.ErrInvalidSecret))
	_, err = gitrepo.NewSigner(map[string][]byte{"git.asc": private.Bytes(), "passphrase": []byte("wrong")})
	g.Expect(err).To(MatchError(gitrepo.ErrInvalidSecret))
	g.Expect(err.Error()).NotTo(ContainSubstring("wrong"))
	signer, err := gitrepo.NewSigner(map[string][]byte{"git.asc": private.Bytes(), "passphrase": []byte("pass phrase")})
	g.Expect(err).NotTo(HaveOccurred())

	srv := gitserver.Start(t)
	sha := signedWriteBack(t, srv, signer)

	gnupg := t.TempDir()
	env := []string{"GNUPGHOME=" + gnupg}
	pubFile := filepath.Join(gnupg, "uprev.asc")
	g.Expect(os.WriteFile(pubFile, public.Bytes(), 0o600)).To(Succeed())
	out, err := runCommand(t, "", env, "gpg", "--batch", "--import", pubFile)
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = runGit(t, srv.RepoDir("fleet"), env, "verify-commit", "-v", sha)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`Good signature from "uprev <uprev@example.com>"`))
}

func TestSSHSignedCommitVerifies(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	// The test server's client key doubles as a signing key.
	_, err := gitrepo.NewSigner(map[string][]byte{"identity": []byte("not a key")})
	g.Expect(err).To(MatchError(gitrepo.ErrInvalidSecret))
	_, err = gitrepo.NewSigner(nil)
	g.Expect(err).To(MatchError(gitrepo.ErrInvalidSecret))
	signer, err := gitrepo.NewSigner(map[string][]byte{"identity": srv.ClientKeyPEM()})
	g.Expect(err).NotTo(HaveOccurred())

	sha := signedWriteBack(t, srv, signer)

	allowed := filepath.Join(t.TempDir(), "allowed_signers")
	line := "uprev@example.com " + string(ssh.MarshalAuthorizedKey(srv.ClientPublicKey()))
	g.Expect(os.WriteFile(allowed, []byte(line), 0o600)).To(Succeed())
	out, err := runGit(t, srv.RepoDir("fleet"), nil,
		"-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+allowed, "verify-commit", "-v", sha)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`Good "git" signature for uprev@example.com`))

	// Another key does not verify.
	other := gitserver.Start(t)
	line = "uprev@example.com " + string(ssh.MarshalAuthorizedKey(other.ClientPublicKey()))
	g.Expect(os.WriteFile(allowed, []byte(line), 0o600)).To(Succeed())
	out, err = runGit(t, srv.RepoDir("fleet"), nil,
		"-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+allowed, "verify-commit", sha)
	g.Expect(err).To(HaveOccurred(), out)
}
