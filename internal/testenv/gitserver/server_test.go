package gitserver_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// git runs the git CLI as a client would, isolated from the user's config.
func git(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
	}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestHTTPBasicAuthCloneAndPush(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t, gitserver.WithBasicAuth("alice", "s3cret"))
	repoURL := srv.InitRepo(t, "fleet", "main", map[string]string{"a.yaml": "a: 1\n"})

	resp, err := http.Get(repoURL + "/info/refs?service=git-upload-pack")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Body.Close()).To(Succeed())
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(resp.Header.Get("WWW-Authenticate")).To(Equal(`Basic realm="uprev-test"`))

	u, err := url.Parse(repoURL)
	g.Expect(err).NotTo(HaveOccurred())
	u.User = url.UserPassword("alice", "s3cret")
	dir := t.TempDir()
	out, err := git(t, "", nil, "clone", u.String(), dir)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(filepath.Join(dir, "a.yaml")).To(BeAnExistingFile())

	g.Expect(os.WriteFile(filepath.Join(dir, "b.yaml"), []byte("b: 2\n"), 0o644)).To(Succeed())
	out, err = git(t, dir, nil, "add", "b.yaml")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = git(t, dir, nil, "commit", "-m", "Add b")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = git(t, dir, nil, "push", "origin", "main")
	g.Expect(err).NotTo(HaveOccurred(), out)

	g.Expect(srv.ReadFile(t, "fleet", "main", "b.yaml")).To(Equal("b: 2\n"))
	g.Expect(srv.Counts()).To(Equal(gitserver.Counts{UploadPack: 1, ReceivePack: 1}))
}

func TestHTTPBearerToken(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t, gitserver.WithBearerToken("tok3n"))
	repoURL := srv.InitRepo(t, "fleet", "main", map[string]string{"a.yaml": "a: 1\n"})

	out, err := git(t, "", nil, "ls-remote", repoURL)
	g.Expect(err).To(HaveOccurred(), out)
	out, err = git(t, "", nil, "-c", "http.extraHeader=Authorization: Bearer tok3n", "ls-remote", repoURL)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("refs/heads/main"))
}

func TestSSHCloneAndPush(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	srv.InitRepo(t, "fleet", "main", map[string]string{"a.yaml": "a: 1\n"})

	home := t.TempDir()
	key := filepath.Join(home, "id")
	known := filepath.Join(home, "known_hosts")
	g.Expect(os.WriteFile(key, srv.ClientKeyPEM(), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(known, srv.KnownHosts(), 0o600)).To(Succeed())
	sshCmd := "GIT_SSH_COMMAND=ssh -i " + key + " -o IdentitiesOnly=yes -o UserKnownHostsFile=" + known +
		" -o StrictHostKeyChecking=yes -F /dev/null"

	dir := t.TempDir()
	out, err := git(t, "", []string{sshCmd}, "clone", srv.SSHURL("fleet"), dir)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(os.WriteFile(filepath.Join(dir, "b.yaml"), []byte("b: 2\n"), 0o644)).To(Succeed())
	_, err = git(t, dir, nil, "add", "b.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = git(t, dir, nil, "commit", "-m", "Add b")
	g.Expect(err).NotTo(HaveOccurred())
	out, err = git(t, dir, []string{sshCmd}, "push", "origin", "main")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(srv.Log(t, "fleet", "main")[0].Subject).To(Equal("Add b"))

	// An unknown host key is refused by a strict client.
	other := gitserver.Start(t)
	g.Expect(os.WriteFile(known, other.KnownHosts(), 0o600)).To(Succeed())
	out, err = git(t, "", []string{sshCmd}, "ls-remote", srv.SSHURL("fleet"))
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Host key verification failed"))
}

func TestHelpers(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	srv.InitRepo(t, "fleet", "main", map[string]string{"a.yaml": "a: 1\n", "dir/b.yaml": "b: 1\n"})

	sha := srv.CommitFile(t, "fleet", "main", "dir/b.yaml", "b: 2\n", "Update b\n\nUprev-Update: ns/b 1 --> 2")
	g.Expect(srv.ReadFile(t, "fleet", "main", "dir/b.yaml")).To(Equal("b: 2\n"))
	g.Expect(srv.ReadFile(t, "fleet", "main", "a.yaml")).To(Equal("a: 1\n"))
	revert := srv.Revert(t, "fleet", "main", sha)

	log := srv.Log(t, "fleet", "main")
	g.Expect(log).To(HaveLen(3))
	g.Expect(log[0].SHA).To(Equal(revert))
	g.Expect(log[0].Body).To(ContainSubstring("This reverts commit " + sha + "."))
	g.Expect(log[1]).To(Equal(gitserver.Commit{
		SHA: sha, Parents: []string{log[2].SHA}, Subject: "Update b", Body: "Uprev-Update: ns/b 1 --> 2",
	}))
	g.Expect(log[2].Parents).To(BeEmpty())

	branchSHA := srv.CommitFile(t, "fleet", "feature", "c.yaml", "c: 1\n", "Start feature")
	g.Expect(srv.Log(t, "fleet", "feature")).To(Equal([]gitserver.Commit{{SHA: branchSHA, Subject: "Start feature"}}))

	dir := srv.Clone(t, "fleet")
	content, err := os.ReadFile(filepath.Join(dir, "dir", "b.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(content)).To(Equal("b: 1\n"))
	g.Expect(strings.TrimSpace(srv.Git(t, "fleet", "symbolic-ref", "HEAD"))).To(Equal("refs/heads/main"))
}

// TestCommitFileKeepsEveryWritersCommit is two people committing to one
// branch at once, as CommitFile stands for someone pushing beside the
// manager (test/crash commits while a killed manager's push still lands):
// the one who loses the race builds on the new tip, as after a refused
// push, so every commit stays and history stays linear.
func TestCommitFileKeepsEveryWritersCommit(t *testing.T) {
	srv := gitserver.Start(t)
	srv.InitRepo(t, "fleet", "main", map[string]string{"a.yaml": "a: 1\n"})
	const perWriter = 30
	var mu sync.Mutex
	var shas []string
	t.Run("writers", func(t *testing.T) {
		for _, writer := range []string{"alice", "bob"} {
			t.Run(writer, func(t *testing.T) {
				t.Parallel()
				for i := range perWriter {
					path := fmt.Sprintf("%s/%d.txt", writer, i)
					sha := srv.CommitFile(t, "fleet", "main", path, path, "Add "+path)
					mu.Lock()
					shas = append(shas, sha)
					mu.Unlock()
				}
			})
		}
	})
	g := NewWithT(t)
	inLog := linearHistory(t, srv)
	g.Expect(inLog).To(HaveLen(2 * perWriter))
	g.Expect(inLog).To(ConsistOf(shas), "every writer's commit is on the branch")
	for _, writer := range []string{"alice", "bob"} {
		for _, path := range []string{writer + "/0.txt", fmt.Sprintf("%s/%d.txt", writer, perWriter-1)} {
			g.Expect(srv.ReadFile(t, "fleet", "main", path)).To(Equal(path))
		}
	}
}

// TestRevertKeepsCommitsThatLandFirst reverts while someone else commits
// to the same branch: a refused push is rebased and pushed again, and
// nobody's commit is lost.
func TestRevertKeepsCommitsThatLandFirst(t *testing.T) {
	srv := gitserver.Start(t)
	srv.InitRepo(t, "fleet", "main", map[string]string{"a.yaml": "a: 1\n"})
	target := srv.CommitFile(t, "fleet", "main", "carol.txt", "carol", "Add carol.txt")
	const reverts, notes = 6, 40
	var reverted, noted []string
	t.Run("writers", func(t *testing.T) {
		t.Run("carol", func(t *testing.T) {
			t.Parallel()
			for range reverts {
				// Each revert undoes the one before, so carol.txt comes and goes.
				target = srv.Revert(t, "fleet", "main", target)
				reverted = append(reverted, target)
			}
		})
		t.Run("bob", func(t *testing.T) {
			t.Parallel()
			for i := range notes {
				noted = append(noted, srv.CommitFile(t, "fleet", "main", fmt.Sprintf("bob/%d.txt", i), "note", "Note"))
			}
		})
	})
	g := NewWithT(t)
	inLog := linearHistory(t, srv)
	g.Expect(inLog).To(HaveLen(1 + reverts + notes))
	g.Expect(inLog).To(ContainElements(reverted), "every revert is on the branch")
	g.Expect(inLog).To(ContainElements(noted), "every commit pushed beside the reverts stays")
	g.Expect(srv.Git(t, "fleet", "ls-tree", "--name-only", "main")).To(ContainSubstring("carol.txt"), "an even number of reverts leaves carol.txt")
}

// linearHistory checks that each commit on main of the repository fleet
// has one parent, the commit before it, and returns the SHAs of all but
// the first, newest first.
func linearHistory(t *testing.T, srv *gitserver.Server) []string {
	t.Helper()
	log := srv.Log(t, "fleet", "main")
	var shas []string
	for i, commit := range log[:len(log)-1] {
		if len(commit.Parents) != 1 || commit.Parents[0] != log[i+1].SHA {
			t.Fatalf("history is not linear: %s %q has parents %v, not %s", commit.SHA, commit.Subject, commit.Parents, log[i+1].SHA)
		}
		shas = append(shas, commit.SHA)
	}
	if first := log[len(log)-1]; len(first.Parents) != 0 {
		t.Fatalf("the first commit %s has parents %v", first.SHA, first.Parents)
	}
	return shas
}

func TestHTTPS(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t, gitserver.WithTLS())
	repoURL := srv.InitRepo(t, "fleet", "main", nil)
	g.Expect(repoURL).To(HavePrefix("https://"))

	ca := filepath.Join(t.TempDir(), "ca.crt")
	g.Expect(os.WriteFile(ca, srv.CACertPEM(), 0o600)).To(Succeed())
	out, err := git(t, "", nil, "ls-remote", repoURL)
	g.Expect(err).To(HaveOccurred(), out)
	out, err = git(t, "", nil, "-c", "http.sslCAInfo="+ca, "ls-remote", repoURL)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("refs/heads/main"))
}

func TestBeforePushRejectsAPushBuiltOnTheOldTip(t *testing.T) {
	g := NewWithT(t)
	var srv *gitserver.Server
	var mu sync.Mutex
	var hooked []string
	srv = gitserver.Start(t, gitserver.WithBeforePush(func(repo string) {
		mu.Lock()
		defer mu.Unlock()
		hooked = append(hooked, repo)
		if len(hooked) == 1 {
			srv.CommitFile(t, repo, "main", "c.yaml", "c: 3\n", "Someone else's push")
		}
	}))
	repoURL := srv.InitRepo(t, "fleet", "main", map[string]string{"a.yaml": "a: 1\n"})
	dir := t.TempDir()
	out, err := git(t, "", nil, "clone", repoURL, dir)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(os.WriteFile(filepath.Join(dir, "b.yaml"), []byte("b: 2\n"), 0o644)).To(Succeed())
	out, err = git(t, dir, nil, "add", "b.yaml")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = git(t, dir, nil, "commit", "-m", "Add b")
	g.Expect(err).NotTo(HaveOccurred(), out)

	out, err = git(t, dir, nil, "push", "origin", "main")
	g.Expect(err).To(HaveOccurred(), out)
	g.Expect(srv.Log(t, "fleet", "main")[0].Subject).To(Equal("Someone else's push"))

	out, err = git(t, dir, nil, "pull", "--rebase", "origin", "main")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = git(t, dir, nil, "push", "origin", "main")
	g.Expect(err).NotTo(HaveOccurred(), out)
	mu.Lock()
	defer mu.Unlock()
	g.Expect(hooked).To(Equal([]string{"fleet", "fleet"}))
	g.Expect(srv.ReadFile(t, "fleet", "main", "b.yaml")).To(Equal("b: 2\n"))
}
