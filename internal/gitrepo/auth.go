package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Keys of a Git Secret's data, as Flux names them.
const (
	SecretUsername    = "username"
	SecretPassword    = "password"
	SecretBearerToken = "bearerToken"
	SecretIdentity    = "identity"
	SecretKnownHosts  = "known_hosts"
	SecretCACert      = "ca.crt"
)

// DefaultTimeout bounds each network operation with a remote whose
// Timeout is not set, as Flux's GitRepository timeout does by default.
const DefaultTimeout = 60 * time.Second

// Remote is a Git repository URL and what it takes to reach it.
type Remote struct {
	// URL is the repository URL: https://, http:// or ssh://.
	URL string
	// Timeout bounds each network operation with the remote (a clone, a
	// fetch, a push) and the wait for its kept clone; zero means
	// DefaultTimeout.
	Timeout time.Duration

	auth     transport.AuthMethod
	caBundle []byte
	proxy    transport.ProxyOptions
	// ssh says the URL is ssh://.
	ssh bool
}

// UseProxy sends the remote's traffic through the proxy at u (http://,
// https:// or socks5://), with u's user info as the proxy's credentials.
func (r *Remote) UseProxy(u *url.URL) {
	password, _ := u.User.Password()
	plain := *u
	plain.User = nil
	r.proxy = transport.ProxyOptions{URL: plain.String(), Username: u.User.Username(), Password: password}
}

// timeout returns the bound of one network operation.
func (r *Remote) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}

// Host returns the host (and port) of the remote's URL, without the user
// or anything else that could hold a credential.
func (r *Remote) Host() string {
	if u, err := url.Parse(r.URL); err == nil && u.Host != "" {
		return u.Host
	}
	return "the Git server"
}

// Redacted returns the remote's URL with its password, if any, replaced,
// for messages.
func (r *Remote) Redacted() string {
	if u, err := url.Parse(r.URL); err == nil {
		return u.Redacted()
	}
	return r.Host()
}

// withDeadline runs op, a network operation described by what, under the
// remote's timeout, with the proxy options op must use, and reports a
// timeout that passed as ErrTimeout naming the host. go-git's HTTP
// transport ends its requests and their reads with the context; its SSH
// transport shakes hands before it looks at the context, so SSH
// connections get the deadline on the connection itself (sshDeadlineProxy).
func (r *Remote) withDeadline(ctx context.Context, what string, op func(context.Context, transport.ProxyOptions) error) error {
	deadline := time.Now().Add(r.timeout())
	opCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	proxyOpts := r.proxy
	if r.ssh {
		var forget func()
		var err error
		if proxyOpts, forget, err = sshDeadlineProxy(deadline, r.proxy); err != nil {
			return err
		}
		defer forget()
	}
	err := op(opCtx, proxyOpts)
	if err != nil && ctx.Err() == nil && !time.Now().Before(deadline) {
		return fmt.Errorf("%w: %s %s gave no answer within %s", ErrTimeout, what, r.Host(), r.timeout())
	}
	return err
}

// NewRemote returns the Remote for rawURL authenticated with the data of a
// Secret (nil for anonymous access):
//
//   - https:// and http://: username and password (basic auth) or
//     bearerToken; ca.crt adds a CA for HTTPS servers with their own.
//   - ssh://: identity (a PEM private key; password is its passphrase) and
//     known_hosts, both required: a host not in known_hosts is refused,
//     never trusted. The user is the URL's (default git).
//
// Errors wrap ErrInvalidURL or ErrInvalidSecret and never hold secret
// values. Access.Remote is the way the controllers call it.
func NewRemote(rawURL string, data map[string][]byte) (*Remote, error) {
	if err := checkURL(rawURL); err != nil {
		return nil, err
	}
	u, _ := url.Parse(rawURL)
	r := &Remote{URL: rawURL}
	var err error
	if u.Scheme == "ssh" {
		r.ssh = true
		r.auth, err = sshAuth(u, data)
	} else {
		r.caBundle = data[SecretCACert]
		r.auth, err = httpAuth(data)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

func httpAuth(data map[string][]byte) (transport.AuthMethod, error) {
	user, pass, token := data[SecretUsername], data[SecretPassword], data[SecretBearerToken]
	switch {
	case len(token) > 0 && (len(user) > 0 || len(pass) > 0):
		return nil, fmt.Errorf("%w: both %s and %s/%s are set", ErrInvalidSecret, SecretBearerToken, SecretUsername, SecretPassword)
	case len(token) > 0:
		return &githttp.TokenAuth{Token: string(token)}, nil
	case len(user) > 0 || len(pass) > 0:
		if len(user) == 0 {
			return nil, fmt.Errorf("%w: %s is set without %s", ErrInvalidSecret, SecretPassword, SecretUsername)
		}
		return &githttp.BasicAuth{Username: string(user), Password: string(pass)}, nil
	default:
		return nil, nil
	}
}

func sshAuth(u *url.URL, data map[string][]byte) (transport.AuthMethod, error) {
	identity, known := data[SecretIdentity], data[SecretKnownHosts]
	if len(identity) == 0 {
		return nil, fmt.Errorf("%w: %s is required for ssh:// URLs", ErrInvalidSecret, SecretIdentity)
	}
	if len(known) == 0 {
		return nil, fmt.Errorf("%w: %s is required for ssh:// URLs", ErrInvalidSecret, SecretKnownHosts)
	}
	user := u.User.Username()
	if user == "" {
		user = "git"
	}
	keys, err := gitssh.NewPublicKeys(user, identity, string(data[SecretPassword]))
	if err != nil {
		// The parser's errors name no key material.
		return nil, fmt.Errorf("%w: parsing %s: %w", ErrInvalidSecret, SecretIdentity, err)
	}
	callback, err := hostKeyCallback(known)
	if err != nil {
		return nil, err
	}
	keys.HostKeyCallback = callback
	return keys, nil
}

// hostKeyCallback verifies host keys against known_hosts content. A host
// that is not listed, or listed with another key, fails with
// ErrUnknownHostKey.
func hostKeyCallback(known []byte) (ssh.HostKeyCallback, error) {
	// knownhosts reads files only; the content is read once, here.
	f, err := os.CreateTemp("", "uprev-known-hosts-*")
	if err != nil {
		return nil, fmt.Errorf("writing known_hosts: %w", err)
	}
	defer func() { _ = os.Remove(f.Name()) }() // read at once below; a temp file left behind holds only public host keys
	_, werr := f.Write(known)
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, fmt.Errorf("writing known_hosts: %w", err)
	}
	check, err := knownhosts.New(f.Name())
	if err != nil {
		return nil, fmt.Errorf("%w: parsing %s: %w", ErrInvalidSecret, SecretKnownHosts, err)
	}
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := check(hostname, remote, key)
		var keyErr *knownhosts.KeyError
		if errors.As(err, &keyErr) {
			return fmt.Errorf("%w: %s presented %s %s", ErrUnknownHostKey, hostname, key.Type(), ssh.FingerprintSHA256(key))
		}
		return err
	}, nil
}
