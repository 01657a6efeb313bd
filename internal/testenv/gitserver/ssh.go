package gitserver

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// sshServer accepts one authorised client key and runs git-upload-pack and
// git-receive-pack for exec requests.
type sshServer struct {
	addr       string
	hostKey    ssh.PublicKey
	clientKey  []byte
	clientPub  ssh.PublicKey
	listener   net.Listener
	conns      sync.WaitGroup
	srv        *Server
	serverConf *ssh.ServerConfig
	logs       io.Writer
}

// startSSH starts the SSH endpoint of srv on a free port of 127.0.0.1;
// close stops it. Errors of running git go to logs.
func startSSH(srv *Server, logs io.Writer) (*sshServer, error) {
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating SSH host key: %w", err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return nil, fmt.Errorf("loading SSH host key: %w", err)
	}
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating SSH client key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "uprev-test")
	if err != nil {
		return nil, fmt.Errorf("encoding SSH client key: %w", err)
	}
	authorised, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		return nil, fmt.Errorf("encoding SSH client public key: %w", err)
	}
	s := &sshServer{
		hostKey:   hostSigner.PublicKey(),
		clientKey: pem.EncodeToMemory(block),
		clientPub: authorised,
		srv:       srv,
		logs:      logs,
	}
	s.serverConf = &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), authorised.Marshal()) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("public key not authorised")
		},
	}
	s.serverConf.AddHostKey(hostSigner)
	s.listener, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for SSH: %w", err)
	}
	s.addr = s.listener.Addr().String()
	go s.serve()
	return s, nil
}

// close stops accepting connections and waits for those open to end.
func (s *sshServer) close() {
	_ = s.listener.Close()
	s.conns.Wait()
}

func (s *sshServer) serve() {
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			return
		}
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			s.handleConn(conn)
		}()
	}
}

func (s *sshServer) handleConn(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	sconn, chans, reqs, err := ssh.NewServerConn(conn, s.serverConf)
	if err != nil {
		return // failed handshakes (wrong key, unknown host) are what some tests check
	}
	defer func() { _ = sconn.Close() }()
	go ssh.DiscardRequests(reqs)
	var sessions sync.WaitGroup
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			s.handleSession(ch, chReqs)
		}()
	}
	sessions.Wait()
}

// handleSession runs the first exec request of a session and reports its
// exit status.
func (s *sshServer) handleSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer func() { _ = ch.Close() }()
	for req := range reqs {
		switch req.Type {
		case "env":
			_ = req.Reply(true, nil)
		case "exec":
			var payload struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
				_ = req.Reply(false, nil)
				continue
			}
			_ = req.Reply(true, nil)
			status := s.exec(ch, payload.Command)
			_, _ = ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, status))
			return
		default:
			_ = req.Reply(false, nil)
		}
	}
}

// exec runs `git-upload-pack '<path>'` or `git-receive-pack '<path>'` on a
// repository under the server root and returns its exit status.
func (s *sshServer) exec(ch ssh.Channel, command string) uint32 {
	service, arg, _ := strings.Cut(command, " ")
	switch service {
	case "git-upload-pack":
		s.srv.uploads.Add(1)
	case "git-receive-pack":
		s.srv.pushes.Add(1)
	default:
		_, _ = fmt.Fprintf(ch.Stderr(), "unsupported command %q\n", service)
		return 1
	}
	rel := filepath.Clean("/" + strings.Trim(arg, "'\""))
	cmd := exec.Command(s.srv.git, strings.TrimPrefix(service, "git-"), filepath.Join(s.srv.root, rel))
	cmd.Env = gitEnv()
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		_, _ = fmt.Fprintf(ch.Stderr(), "%v\n", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		_, _ = fmt.Fprintf(ch.Stderr(), "%v\n", err)
		return 1
	}
	// The client may keep its side open after the command exits; copy its
	// input without making Wait depend on it.
	go func() {
		_, _ = io.Copy(stdin, ch)
		_ = stdin.Close()
	}()
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return uint32(exit.ExitCode())
		}
		_, _ = fmt.Fprintf(s.logs, "running %s: %v\n", service, err)
		return 1
	}
	return 0
}

// HostKey returns the SSH server's public host key.
func (s *Server) HostKey() ssh.PublicKey {
	return s.ssh.hostKey
}

// KnownHosts returns a known_hosts line for the SSH server, as a Secret's
// known_hosts holds it.
func (s *Server) KnownHosts() []byte {
	return []byte(knownhosts.Line([]string{knownhosts.Normalize(s.ssh.addr)}, s.ssh.hostKey) + "\n")
}

// ClientKeyPEM returns the OpenSSH PEM private key the SSH server accepts, as
// a Secret's identity holds it.
func (s *Server) ClientKeyPEM() []byte {
	return s.ssh.clientKey
}

// ClientPublicKey returns the public half of ClientKeyPEM.
func (s *Server) ClientPublicKey() ssh.PublicKey {
	return s.ssh.clientPub
}
