// Package gitea starts a real Gitea (code.gitea.io/gitea, built from the Go
// module proxy by test/gitea/build.sh into bin/) for tests: SQLite in a
// temporary directory, HTTP on a free port of 127.0.0.1, offline, no
// mailer, no SSH, an administrator with an API token, and helpers to make
// repositories and users through Gitea's REST API.
package gitea

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	giteasdk "code.gitea.io/sdk/gitea"

	"github.com/uprev-dev/uprev/internal/testenv/freeport"
	"github.com/uprev-dev/uprev/internal/testenv/reporoot"
	"github.com/uprev-dev/uprev/internal/testenv/syncbuf"
)

// Version is the Gitea that test/gitea/build.sh builds.
const Version = "v1.26.0"

// Server is one running Gitea.
type Server struct {
	// URL is the server's root URL, with a trailing slash.
	URL string
	// Admin is the administrator's user name; AdminPassword its password.
	Admin, AdminPassword string
	// Token is an API token of the administrator with every scope.
	Token string

	dir string
	log *syncbuf.Buffer
}

// Binary returns the gitea binary and its static root (options/,
// templates/): $GITEA_BIN (the static root next to it, as build.sh writes
// it), or bin/gitea at the repository root. It fails, saying how to build
// them, when either is missing.
func Binary() (bin, staticRoot string, err error) {
	bin = os.Getenv("GITEA_BIN")
	if bin == "" {
		bin = filepath.Join(reporoot.Dir(), "bin", "gitea")
	}
	staticRoot = filepath.Join(filepath.Dir(bin), "gitea-"+Version)
	for _, p := range []string{bin, filepath.Join(staticRoot, "options", "locale")} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("gitea %s not found (%s): run `make gitea` (or test/gitea/build.sh) to build it into bin/, about 4 to 7 minutes, or set GITEA_BIN", Version, p)
		}
	}
	return bin, staticRoot, nil
}

// Start starts Gitea for one test, with an administrator and its token,
// and stops it when the test ends. It fails the test, saying how to build
// Gitea, when the binary is missing.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, static, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "gitea-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	addr := freeport.Addr(t)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: "http://" + addr + "/", Admin: "uprev-admin", AdminPassword: "P4ss-" + rand.Text(), dir: dir, log: &syncbuf.Buffer{}}
	config := filepath.Join(dir, "app.ini")
	if err := os.WriteFile(config, []byte(appIni(dir, static, port)), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cmd := s.command(ctx, bin, "web", "--config", config, "--work-path", dir, "--port", port)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	// Gitea shuts down gracefully on SIGTERM, which can take a minute; a
	// test server has nothing to keep.
	cmd.Cancel = func() error { return cmd.Process.Kill() }
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting gitea: %v", err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() {
		exitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	if err := s.waitReady(exited, &exitErr, 2*time.Minute); err != nil {
		t.Fatalf("gitea did not become ready: %v\n%s", err, s.log.String())
	}

	admin := s.command(context.Background(), bin, "admin", "user", "create", "--config", config, "--work-path", dir,
		"--username", s.Admin, "--password", s.AdminPassword, "--email", "admin@uprev.example", "--admin", "--must-change-password=false")
	if out, err := admin.CombinedOutput(); err != nil {
		t.Fatalf("gitea admin user create: %v\n%s", err, out)
	}
	basic, err := giteasdk.NewClient(s.URL, giteasdk.SetBasicAuth(s.Admin, s.AdminPassword))
	if err != nil {
		t.Fatalf("gitea client: %v", err)
	}
	tok, _, err := basic.CreateAccessToken(giteasdk.CreateAccessTokenOption{Name: "uprev-tests", Scopes: []giteasdk.AccessTokenScope{
		giteasdk.AccessTokenScopeAll,
	}})
	if err != nil {
		t.Fatalf("creating the administrator's token: %v", err)
	}
	s.Token = tok.Token
	return s
}

// command runs gitea with its environment: a home in the server's
// directory, and killed with the test process.
func (s *Server) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "HOME="+s.dir, "GITEA_WORK_DIR="+s.dir, "USER="+currentUser())
	cmd.SysProcAttr = sysProcAttr()
	// Children (git) may hold the output open after Gitea exits.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// waitReady polls /api/healthz until it answers 200, the process exits or
// the timeout passes.
func (s *Server) waitReady(exited <-chan struct{}, exitErr *error, timeout time.Duration) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-exited:
			return fmt.Errorf("gitea exited: %v", *exitErr)
		case <-deadline:
			return errors.New("timed out after " + timeout.String())
		case <-tick.C:
			resp, err := client.Get(s.URL + "api/healthz")
			if err == nil {
				_ = resp.Body.Close() // the status is all it needs
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
	}
}

// Client returns an API client authenticated with the administrator's token.
func (s *Server) Client(t testing.TB) *giteasdk.Client {
	t.Helper()
	c, err := giteasdk.NewClient(s.URL, giteasdk.SetToken(s.Token))
	if err != nil {
		t.Fatalf("gitea client: %v", err)
	}
	return c
}

// CreateRepo creates the administrator's repository name with files on
// branch (one commit per file) and returns its HTTP clone URL.
func (s *Server) CreateRepo(t testing.TB, name, branch string, files map[string]string) string {
	t.Helper()
	c := s.Client(t)
	repo, _, err := c.CreateRepo(giteasdk.CreateRepoOption{Name: name, AutoInit: true, DefaultBranch: branch, Readme: "Default"})
	if err != nil {
		t.Fatalf("creating repository %s: %v", name, err)
	}
	for path, content := range files {
		_, _, err := c.CreateFile(s.Admin, name, path, giteasdk.CreateFileOptions{
			FileOptions: giteasdk.FileOptions{BranchName: branch, Message: "Add " + path},
			Content:     base64.StdEncoding.EncodeToString([]byte(content)),
		})
		if err != nil {
			t.Fatalf("adding %s to %s: %v", path, name, err)
		}
	}
	return repo.CloneURL
}

// CreateUser creates a user, and makes it a collaborator with write
// access to the administrator's repository repo when repo is not empty,
// so that it can be asked for reviews.
func (s *Server) CreateUser(t testing.TB, name, repo string) {
	t.Helper()
	c := s.Client(t)
	mustChange := false
	if _, _, err := c.AdminCreateUser(giteasdk.CreateUserOption{Username: name, Email: name + "@uprev.example",
		Password: "P4ss-" + rand.Text(), MustChangePassword: &mustChange}); err != nil {
		t.Fatalf("creating user %s: %v", name, err)
	}
	if repo != "" {
		write := giteasdk.AccessModeWrite
		if _, err := c.AddCollaborator(s.Admin, repo, name, giteasdk.AddCollaboratorOption{Permission: &write}); err != nil {
			t.Fatalf("adding %s to %s: %v", name, repo, err)
		}
	}
}

// MergePullRequest merges pull request index of the administrator's
// repository repo, as a person would. Gitea checks whether a new pull
// request can be merged in the background and refuses to merge it until
// then, so the merge is tried until it is accepted, for up to 30 seconds.
func (s *Server) MergePullRequest(t testing.TB, repo string, index int64) {
	t.Helper()
	c := s.Client(t)
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		merged, resp, err := c.MergePullRequest(s.Admin, repo, index, giteasdk.MergePullRequestOption{Style: giteasdk.MergeStyleMerge})
		if err == nil && merged {
			return
		}
		select {
		case <-deadline:
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.Fatalf("merging pull request #%d of %s: HTTP %d: %v", index, repo, status, err)
		case <-tick.C:
		}
	}
}

// Log returns what Gitea wrote so far, for failure messages.
func (s *Server) Log() string { return s.log.String() }

// appIni is Gitea's configuration: installed, offline, SQLite, no mail.
func appIni(dir, static, port string) string {
	return strings.NewReplacer("@DIR@", dir, "@STATIC@", static, "@PORT@", port, "@USER@", currentUser(),
		"@SECRET@", rand.Text()+rand.Text()).Replace(`APP_NAME = uprev tests
RUN_USER = @USER@
RUN_MODE = prod
WORK_PATH = @DIR@
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = @PORT@
DOMAIN = 127.0.0.1
ROOT_URL = http://127.0.0.1:@PORT@/
STATIC_ROOT_PATH = @STATIC@
APP_DATA_PATH = @DIR@/data
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false

[database]
DB_TYPE = sqlite3
PATH = @DIR@/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = @DIR@/repositories
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = @SECRET@
PASSWORD_HASH_ALGO = pbkdf2_hi

[oauth2]
ENABLED = false

[service]
DISABLE_REGISTRATION = true
ENABLE_NOTIFY_MAIL = false
DEFAULT_KEEP_EMAIL_PRIVATE = true

[mailer]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[queue]
TYPE = channel

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[cron]
ENABLED = false

[cron.update_checker]
ENABLED = false

[actions]
ENABLED = false

[packages]
ENABLED = false

[log]
MODE = console
LEVEL = Warn
ROOT_PATH = @DIR@/log
`)
}

// currentUser is the user tests run as, Gitea's RUN_USER.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "root"
}
