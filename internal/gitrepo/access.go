package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"time"
)

// ErrInvalidURL means the URL of a repository cannot be reached by Git:
// it does not parse or its scheme is not https, http or ssh. Retrying
// does not help; the object's URL must change.
var ErrInvalidURL = errors.New("invalid Git URL")

// Access is everything it takes to reach a repository an object names:
// its URL, the data of its Secret, a CA and a proxy given beside it, its
// timeout and, for a Secret naming a GitHub App, the exchange of the
// app's key for an installation token. Every controller that reads Git
// (Syncs, UpdateAutomations, gitTags ReleaseSources) builds its Remote
// here, so credentials, CA, proxy and their errors are read one way.
type Access struct {
	// URL is the repository's URL.
	URL string
	// Field names the field of the object that holds URL, such as
	// spec.git.url, for the message of an ErrInvalidURL.
	Field string
	// Secret is the data of the Git Secret, nil for anonymous access.
	Secret map[string][]byte
	// CACert is a CA given beside the Secret (a certificate Secret's
	// ca.crt); it takes the place of the Secret's own ca.crt.
	CACert []byte
	// Proxy, when set, is the proxy the remote's traffic goes through.
	Proxy *url.URL
	// Timeout bounds each network operation with the remote, the GitHub
	// App exchange included; zero means DefaultTimeout.
	Timeout time.Duration
	// App is the token cache and the object a GitHub App token is fetched
	// for; its Timeout is Access's.
	App GitHubApp
}

// Remote returns the repository with its credentials. A GitHub App in
// the Secret is exchanged for an installation token first (through
// GitHubApp.Credentials, the one exchange). Its errors wrap
// ErrInvalidURL for a URL Git cannot read (prefixed with Field),
// ErrInvalidSecret for a Secret that cannot work, and the exchange's
// ErrAuthentication or ErrTimeout; they never hold a secret value.
func (a Access) Remote(ctx context.Context) (*Remote, error) {
	data := a.Secret
	if len(a.CACert) > 0 {
		data = maps.Clone(data)
		if data == nil {
			data = map[string][]byte{}
		}
		data[SecretCACert] = a.CACert
	}
	if err := checkURL(a.URL); err != nil {
		return nil, fmt.Errorf("%s: %w", a.Field, err)
	}
	if IsGitHubApp(data) {
		app := a.App
		app.Timeout = a.Timeout
		var err error
		if data, err = app.Credentials(ctx, a.URL, data); err != nil {
			return nil, err
		}
	}
	remote, err := NewRemote(a.URL, data)
	if err != nil {
		return nil, err
	}
	remote.Timeout = a.Timeout
	if a.Proxy != nil {
		remote.UseProxy(a.Proxy)
	}
	return remote, nil
}

// checkURL returns an error wrapping ErrInvalidURL when rawURL does not
// parse or is not https://, http:// or ssh://.
func checkURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	switch u.Scheme {
	case "https", "http", "ssh":
		return nil
	default:
		return fmt.Errorf("%w: unsupported scheme %q (want https, http or ssh)", ErrInvalidURL, u.Scheme)
	}
}
