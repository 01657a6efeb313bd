package gitserver

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Identity of the commits the helpers make, standing for a person who pushes
// to the repository besides the code under test.
const (
	AuthorName  = "Someone Else"
	AuthorEmail = "someone@example.com"
)

// Commit is one commit of a branch's history, as Log returns it.
type Commit struct {
	// SHA is the full commit hash.
	SHA string
	// Parents are the full hashes of the parent commits.
	Parents []string
	// Subject is the first line of the message.
	Subject string
	// Body is the message after the subject and the blank line.
	Body string
}

// InitRepo creates the bare repository name whose branch holds one commit
// with files (path → content), makes branch its default branch, and returns
// its HTTP URL.
func (s *Server) InitRepo(t testing.TB, name, branch string, files map[string]string) string {
	t.Helper()
	url, err := s.CreateRepo(name, branch, files)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// CreateRepo is InitRepo for programs that are not tests (make demo): it
// returns an error instead of failing a test.
func (s *Server) CreateRepo(name, branch string, files map[string]string) (string, error) {
	bare := s.RepoDir(name)
	if _, err := s.runErr("", nil, "", "init", "--quiet", "--bare", "--initial-branch="+branch, bare); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp("", "gitserver-init-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(work) }() // a temporary directory
	if _, err := s.runErr(work, nil, "", "init", "--quiet", "--initial-branch="+branch); err != nil {
		return "", err
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(work, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, []byte(files[p]), 0o644); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{
		{"add", "--all"},
		{"commit", "--quiet", "--allow-empty", "-m", "Initial commit"},
		{"push", "--quiet", bare, branch},
	} {
		if _, err := s.runErr(work, nil, "", args...); err != nil {
			return "", err
		}
	}
	return s.HTTPURL(name), nil
}

// Clone clones the repository name with the git CLI into a new temporary
// directory and returns it.
func (s *Server) Clone(t testing.TB, name string) string {
	t.Helper()
	dir := t.TempDir()
	s.run(t, "", nil, "clone", "--quiet", s.RepoDir(name), dir)
	return dir
}

// CommitFile commits path with content on branch of the repository name, as
// another person pushing to it would, and returns the new commit's SHA. The
// branch is created when it does not exist. It does not need a work tree, so
// it can run concurrently with clients of the server. The branch moves only
// from the commit the new one was built on; when a push lands between, the
// commit is built again on the new tip, as a person does after a refused
// push, so nothing anyone pushed is lost.
func (s *Server) CommitFile(t testing.TB, name, branch, path, content, msg string) string {
	t.Helper()
	return s.commitEntry(t, name, branch, "100644", path, content, msg)
}

// CommitSymlink is CommitFile for a symbolic link at path to target; what
// was at path before (a file or a whole directory) is replaced.
func (s *Server) CommitSymlink(t testing.TB, name, branch, path, target, msg string) string {
	t.Helper()
	return s.commitEntry(t, name, branch, "120000", path, target, msg)
}

// commitEntry commits a tree entry of mode at path holding content, on the
// branch's tip at the moment the branch moves.
func (s *Server) commitEntry(t testing.TB, name, branch, mode, path, content, msg string) string {
	t.Helper()
	bare := s.RepoDir(name)
	ref := "refs/heads/" + branch
	tip := func() string { return s.Git(t, name, "for-each-ref", "--format=%(objectname)", ref) }
	blob := strings.TrimSpace(s.runInput(t, bare, nil, content, "hash-object", "-w", "--stdin"))
	parent := tip()
	for {
		sha := s.commitOn(t, bare, parent, mode+","+blob+","+path, msg)
		// update-ref's old value "" means the branch must not exist yet.
		_, err := s.runErr(bare, nil, "", "update-ref", ref, sha, parent)
		if err == nil {
			return sha
		}
		moved := tip()
		if moved == parent {
			t.Fatal(err)
		}
		parent = moved
	}
}

// commitOn writes a commit of msg whose tree is parent's (none when parent
// is "") with entry ("mode,blob,path") added or replaced, and returns its
// SHA.
func (s *Server) commitOn(t testing.TB, bare, parent, entry, msg string) string {
	t.Helper()
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	if parent != "" {
		s.run(t, bare, env, "read-tree", parent)
	}
	s.run(t, bare, env, "update-index", "--add", "--replace", "--cacheinfo", entry)
	tree := strings.TrimSpace(s.run(t, bare, env, "write-tree"))
	args := []string{"commit-tree", tree, "-F", "-"}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	return strings.TrimSpace(s.runInput(t, bare, nil, msg, args...))
}

// Revert reverts commit sha on branch of the repository name with `git
// revert`, pushes it, and returns the revert commit's SHA. When a push
// lands first, the revert is rebased onto it and pushed again, as a person
// does after a refused push.
func (s *Server) Revert(t testing.TB, name, branch, sha string) string {
	t.Helper()
	dir := t.TempDir()
	s.run(t, "", nil, "clone", "--quiet", "--branch", branch, s.RepoDir(name), dir)
	s.run(t, dir, nil, "revert", "--no-edit", sha)
	for attempt := 1; ; attempt++ {
		_, err := s.runErr(dir, nil, "", "push", "--quiet", "origin", branch)
		if err == nil {
			return strings.TrimSpace(s.run(t, dir, nil, "rev-parse", "HEAD"))
		}
		// "[rejected]" is a push that lost the race, "[remote rejected]"
		// one that met the other's ref lock.
		if !strings.Contains(err.Error(), "rejected]") || attempt == maxPushAttempts {
			t.Fatalf("after %d attempts: %v", attempt, err)
		}
		s.run(t, dir, nil, "pull", "--quiet", "--rebase", "origin", branch)
	}
}

// maxPushAttempts bounds Revert's pushes, so a push that fails for good
// fails the test with git's message rather than at the test's timeout.
const maxPushAttempts = 20

// Log returns the history of branch in the repository name, newest first.
func (s *Server) Log(t testing.TB, name, branch string) []Commit {
	t.Helper()
	out := s.Git(t, name, "log", "--format=%H%x00%P%x00%s%x00%b%x1e", "refs/heads/"+branch)
	var commits []Commit
	for _, rec := range strings.Split(out, "\x1e") {
		fields := strings.Split(strings.TrimLeft(rec, "\n"), "\x00")
		if len(fields) != 4 {
			continue
		}
		c := Commit{SHA: fields[0], Subject: fields[2], Body: strings.TrimRight(fields[3], "\n")}
		if fields[1] != "" {
			c.Parents = strings.Fields(fields[1])
		}
		commits = append(commits, c)
	}
	return commits
}

// ReadFile returns the content of path at the tip of branch in the
// repository name.
func (s *Server) ReadFile(t testing.TB, name, branch, path string) string {
	t.Helper()
	return s.run(t, s.RepoDir(name), nil, "show", "refs/heads/"+branch+":"+path)
}

// Git runs git with args in the bare repository name and returns its
// standard output with surrounding white space trimmed.
func (s *Server) Git(t testing.TB, name string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(s.run(t, s.RepoDir(name), nil, args...))
}

func (s *Server) run(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	return s.runInput(t, dir, env, "", args...)
}

func (s *Server) runInput(t testing.TB, dir string, env []string, input string, args ...string) string {
	t.Helper()
	out, err := s.runErr(dir, env, input, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runErr runs git with args in dir, isolated from the user's configuration,
// and returns its standard output; its error carries git's stderr.
func (s *Server) runErr(dir string, env []string, input string, args ...string) (string, error) {
	cmd := exec.Command(s.git, args...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(), env...)
	cmd.Stdin = strings.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// RunGit runs the git CLI with args in dir, isolated from the user's and
// the system's configuration and committing as AuthorName, and returns its
// trimmed output. It fails the test, with git's stderr, when git fails.
func RunGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// gitEnv isolates git from the user's and the system's configuration and
// gives it an identity.
func gitEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.TempDir(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=" + AuthorName,
		"GIT_AUTHOR_EMAIL=" + AuthorEmail,
		"GIT_COMMITTER_NAME=" + AuthorName,
		"GIT_COMMITTER_EMAIL=" + AuthorEmail,
	}
}
