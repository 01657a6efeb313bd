package gitrepo_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// seedFiles are the files of the test repositories.
var seedFiles = map[string]string{
	"clusters/prod/agent.yaml": "image: ghcr.io/acme/agent:1.4.1\n",
	"clusters/prod/app.yaml":   "image: ghcr.io/acme/app:2.0.0\n",
	"README.md":                "# fleet\n",
}

// author is the identity of the commits under test.
var author = gitrepo.WriteBackOptions{AuthorName: "uprev", AuthorEmail: "uprev@example.com"}

// commitMessage is the message of the commits writeFiles makes.
const commitMessage = "Update images"

// newCache returns a cache in a temporary directory.
func newCache(t testing.TB) *gitrepo.Cache {
	t.Helper()
	c, err := gitrepo.NewCache(filepath.Join(t.TempDir(), "clones"))
	if err != nil {
		t.Fatalf("creating cache: %v", err)
	}
	return c
}

// newRemote returns the Remote for url with the Secret data.
func newRemote(t testing.TB, url string, data map[string][]byte) *gitrepo.Remote {
	t.Helper()
	r, err := gitrepo.NewRemote(url, data)
	if err != nil {
		t.Fatalf("creating remote: %v", err)
	}
	return r
}

// keptFleet is the seeded fleet repository on a Git server of its own,
// cloned into a cache by one session, closed: the kept clone that the next
// session finds in dir.
type keptFleet struct {
	srv    *gitserver.Server
	remote *gitrepo.Remote
	cache  *gitrepo.Cache
	dir    string
}

// newKeptFleet returns a keptFleet of branch main.
func newKeptFleet(t testing.TB) keptFleet {
	t.Helper()
	k := keptFleet{srv: gitserver.Start(t), cache: newCache(t)}
	k.remote = newRemote(t, k.srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	s := open(t, k.cache, k.remote, "main", "")
	k.dir = s.Dir()
	s.Close()
	return k
}

// open opens a session and closes it at the end of the test.
func open(t testing.TB, c *gitrepo.Cache, r *gitrepo.Remote, branch, pushBranch string) *gitrepo.Session {
	t.Helper()
	s, err := c.Open(context.Background(), r, gitrepo.OpenOptions{Branch: branch, PushBranch: pushBranch})
	if err != nil {
		t.Fatalf("opening session: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// writeFiles returns an edit func that writes files (path → content) and
// reports a change with commitMessage, naming the files it wrote.
func writeFiles(files map[string]string) gitrepo.EditFunc {
	return func(dir string, _ *gitrepo.History) (gitrepo.Edit, error) {
		var names []string
		for p, content := range files {
			names = append(names, p)
			full := filepath.Join(dir, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return gitrepo.Edit{}, err
			}
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				return gitrepo.Edit{}, err
			}
		}
		return gitrepo.Edit{Message: commitMessage, Files: names}, nil
	}
}

// writeBack opens a session on branch, pushes the files to pushBranch, and
// returns the pushed SHA.
func writeBack(t testing.TB, c *gitrepo.Cache, r *gitrepo.Remote, branch, pushBranch string, files map[string]string) string {
	t.Helper()
	s := open(t, c, r, branch, pushBranch)
	defer s.Close()
	sha, err := s.WriteBack(context.Background(), author, writeFiles(files))
	if err != nil {
		t.Fatalf("writing back: %v", err)
	}
	return sha
}

// readFile returns the content of a file of the working tree.
func readFile(g *WithT, dir, path string) string {
	content, err := os.ReadFile(filepath.Join(dir, path))
	g.Expect(err).NotTo(HaveOccurred())
	return string(content)
}

// storeDir returns the object store of the kept clone at dir, which its
// .git/commondir names.
func storeDir(g *WithT, dir string) string {
	common, err := os.ReadFile(filepath.Join(dir, ".git", "commondir"))
	g.Expect(err).NotTo(HaveOccurred())
	return filepath.Join(dir, ".git", strings.TrimSpace(string(common)))
}

// diskUsage returns the bytes the files under dir take on disk, as du
// counts them, and how many entries dir holds directly.
func diskUsage(t testing.TB, dir string) (bytes int64, entries int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if path != dir {
			bytes += info.Sys().(*syscall.Stat_t).Blocks * 512
		}
		if filepath.Dir(path) == dir {
			entries++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("measuring %s: %v", dir, err)
	}
	return bytes, entries
}

// runGit runs the git CLI in dir, isolated from the user's configuration,
// and returns its combined output.
func runGit(t testing.TB, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	return runCommand(t, dir, env, "git", args...)
}

// runCommand runs a tool that a test checks results with (git, gpg) in dir,
// isolated from the user's configuration, and returns its combined output.
func runCommand(t testing.TB, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		pkg := name
		if name == "gpg" {
			pkg = "gnupg"
		}
		t.Fatalf("this test needs %s (apt-get install %s): %v", name, pkg, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// subjects returns the subjects of commits, newest first.
func subjects(commits []gitserver.Commit) []string {
	var s []string
	for _, c := range commits {
		s = append(s, c.Subject)
	}
	return s
}
