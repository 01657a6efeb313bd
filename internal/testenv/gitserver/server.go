// Package gitserver runs a real Git server for tests: git http-backend behind
// an in-process HTTP(S) server, and an SSH server that runs git-upload-pack
// and git-receive-pack, both serving the same bare repositories.
//
// Every test that needs a Git remote should start one with Start; the helpers
// on Server (InitRepo, CommitFile, Revert, Log, ...) act on the bare
// repositories directly with the git CLI, as another person pushing would.
package gitserver

import (
	"crypto/subtle"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Realm is the realm the HTTP server names in its WWW-Authenticate header.
const Realm = "uprev-test"

// Option configures a Server.
type Option func(*config)

type config struct {
	username, password string
	bearerToken        string
	tls                bool
	pushGate           <-chan struct{}
	beforePush         func(repo string)
	afterPush          func(repo string)
	advertiseDelay     time.Duration
}

// WithBasicAuth makes the HTTP server require these basic-auth credentials
// on every request.
func WithBasicAuth(username, password string) Option {
	return func(c *config) { c.username, c.password = username, password }
}

// WithBearerToken makes the HTTP server require `Authorization: Bearer
// <token>` on every request.
func WithBearerToken(token string) Option {
	return func(c *config) { c.bearerToken = token }
}

// WithTLS serves HTTPS with a certificate from the test's own CA (see
// Server.CACertPEM) instead of plain HTTP.
func WithTLS() Option {
	return func(c *config) { c.tls = true }
}

// WithPushGate holds every push over HTTP (the git-receive-pack request
// that carries the pack) until gate is closed, as a slow remote would, so
// that a test can look at what a client shows during a push.
func WithPushGate(gate <-chan struct{}) Option {
	return func(c *config) { c.pushGate = gate }
}

// WithBeforePush runs hook before each push over HTTP reaches git (the
// git-receive-pack request that carries the pack), with the name of the
// repository pushed to, as InitRepo names it. What hook does to the
// repository (CommitFile, Revert) happens just before the push lands, as
// a person pushing at the same moment would: a push built on the branch's
// old tip is then rejected. Pushes are served one at a time while a hook
// is set.
func WithBeforePush(hook func(repo string)) Option {
	return func(c *config) { c.beforePush = hook }
}

// WithAfterPush runs hook after each push over HTTP has been served (the
// git-receive-pack request that carries the pack, accepted or not), with
// the name of the repository pushed to, as InitRepo names it: a test
// learns when a push landed without polling the repository.
func WithAfterPush(hook func(repo string)) Option {
	return func(c *config) { c.afterPush = hook }
}

// WithAdvertiseDelay makes every ref advertisement over HTTP (the request
// that starts each clone, fetch, ls-remote and push) answer d late, as a
// busy or distant Git server does: each Git session costs at least d.
func WithAdvertiseDelay(d time.Duration) Option {
	return func(c *config) { c.advertiseDelay = d }
}

// Counts tells how many ref advertisements the server has sent, one per
// fetch, clone or push by any client over HTTP or SSH.
type Counts struct {
	// UploadPack counts git-upload-pack sessions (clone, fetch, ls-remote).
	UploadPack int64
	// ReceivePack counts git-receive-pack sessions (push).
	ReceivePack int64
}

// Server is a running Git server. It is stopped by the test's cleanup.
type Server struct {
	root    string
	git     string
	http    *httptest.Server
	ssh     *sshServer
	cfg     config
	uploads atomic.Int64
	pushes  atomic.Int64
}

// Start starts a Git server with HTTP and SSH endpoints over an empty
// directory of bare repositories. It fails the test if git is not installed.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := New(t.TempDir(), testWriter{t}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// New starts a Git server with HTTP and SSH endpoints on free ports of
// 127.0.0.1, serving the bare repositories under root, for programs that
// are not tests (make demo); git's stderr goes to logs. Close stops it. It
// fails, saying so, when git is not installed.
func New(root string, logs io.Writer, opts ...Option) (*Server, error) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("the Git test server needs the git binary (apt-get install git): %w", err)
	}
	s := &Server{root: root, git: gitPath}
	for _, o := range opts {
		o(&s.cfg)
	}
	backend := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Dir:  s.root,
		Env: append(gitEnv(),
			"GIT_PROJECT_ROOT="+s.root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
			"GIT_CONFIG_KEY_1=safe.directory", "GIT_CONFIG_VALUE_1=*",
		),
		Stderr: logs,
	}
	handler := s.authenticate(s.count(s.delay(s.gate(s.beforePush(s.afterPush(backend))))))
	if s.cfg.tls {
		s.http = httptest.NewTLSServer(handler)
	} else {
		s.http = httptest.NewServer(handler)
	}
	s.ssh, err = startSSH(s, logs)
	if err != nil {
		s.http.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the server's SSH and HTTP endpoints.
func (s *Server) Close() {
	s.ssh.close()
	s.http.Close()
}

// count records ref advertisements, which start every Git HTTP session.
func (s *Server) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			switch r.URL.Query().Get("service") {
			case "git-upload-pack":
				s.uploads.Add(1)
			case "git-receive-pack":
				s.pushes.Add(1)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// delay holds each ref advertisement for the configured delay.
func (s *Server) delay(next http.Handler) http.Handler {
	d := s.cfg.advertiseDelay
	if d == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// gate holds pushes until the configured gate is closed.
func (s *Server) gate(next http.Handler) http.Handler {
	if s.cfg.pushGate == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			select {
			case <-s.cfg.pushGate:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// beforePush runs the configured hook before each push.
func (s *Server) beforePush(next http.Handler) http.Handler {
	hook := s.cfg.beforePush
	if hook == nil {
		return next
	}
	var one sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			one.Lock()
			defer one.Unlock()
			hook(pushedRepo(r))
		}
		next.ServeHTTP(w, r)
	})
}

// afterPush runs the configured hook after each push.
func (s *Server) afterPush(next http.Handler) http.Handler {
	hook := s.cfg.afterPush
	if hook == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			hook(pushedRepo(r))
		}
	})
}

// pushedRepo is the name of the repository a git-receive-pack request
// pushes to, as InitRepo names it.
func pushedRepo(r *http.Request) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/git-receive-pack"), "/"), ".git")
}

// authenticate requires the configured credentials on every request.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", Realm))
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	switch {
	case s.cfg.bearerToken != "":
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return ok && equal(got, s.cfg.bearerToken)
	case s.cfg.username != "":
		user, pass, ok := r.BasicAuth()
		return ok && equal(user, s.cfg.username) && equal(pass, s.cfg.password)
	default:
		return true
	}
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Counts returns how many upload-pack and receive-pack sessions clients have
// started so far.
func (s *Server) Counts() Counts {
	return Counts{UploadPack: s.uploads.Load(), ReceivePack: s.pushes.Load()}
}

// HTTPURL returns the HTTP(S) clone URL of the repository name.
func (s *Server) HTTPURL(name string) string {
	return s.http.URL + "/" + repoPath(name)
}

// SSHURL returns the ssh:// clone URL of the repository name, for user git.
func (s *Server) SSHURL(name string) string {
	return fmt.Sprintf("ssh://git@%s/%s", s.ssh.addr, repoPath(name))
}

// CACertPEM returns the PEM certificate of the CA that signed the HTTPS
// server's certificate (WithTLS), as a Secret's ca.crt holds it.
func (s *Server) CACertPEM() []byte {
	cert := s.http.Certificate()
	if cert == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// RepoDir returns the path of the bare repository name on disk.
func (s *Server) RepoDir(name string) string {
	return filepath.Join(s.root, repoPath(name))
}

// repoPath is the path of a repository under the server root: name.git.
func repoPath(name string) string {
	if strings.HasSuffix(name, ".git") {
		return name
	}
	return name + ".git"
}

// testWriter sends git's stderr to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
