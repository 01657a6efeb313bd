package gitrepo

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"

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

// Remote is a Git repository URL and what it takes to reach it.
type Remote struct {
	// URL is the repository URL: https://, http:// or ssh://.
	URL string

	auth     transport.AuthMethod
	caBundle []byte
	proxy    transport.ProxyOptions
}

// UseProxy sends the remote's traffic through the proxy at u (http://,
// https:// or socks5://), with u's user info as the proxy's credentials.
func (r *Remote) UseProxy(u *url.URL) {
	password, _ := u.User.Password()
	plain := *u
	plain.User = nil
	r.proxy = transport.ProxyOptions{URL: plain.String(), Username: u.User.Username(), Password: password}
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
// Errors wrap ErrInvalidSecret and never hold secret values.
func NewRemote(rawURL string, data map[string][]byte) (*Remote, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parsing Git URL: %w", err)
	}
	r := &Remote{URL: rawURL}
	switch u.Scheme {
	case "https", "http":
		r.caBundle = data[SecretCACert]
		r.auth, err = httpAuth(data)
	case "ssh":
		r.auth, err = sshAuth(u, data)
	default:
		return nil, fmt.Errorf("unsupported Git URL scheme %q (want https, http or ssh)", u.Scheme)
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
	defer os.Remove(f.Name())
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
