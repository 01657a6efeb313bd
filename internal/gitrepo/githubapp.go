package gitrepo

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/url"
	"time"

	"github.com/fluxcd/pkg/auth/githubapp"
	"github.com/fluxcd/pkg/cache"

	"github.com/uprev-dev/uprev/internal/forge"
)

// IsGitHubApp reports whether the data of a Git Secret names a GitHub App
// (githubAppID, Flux's key), whose installation tokens authenticate HTTPS.
func IsGitHubApp(data map[string][]byte) bool {
	return len(data[githubapp.KeyAppID]) > 0
}

// GitHubApp names the object a GitHub App token is fetched for, which the
// token cache's metrics are labelled with.
type GitHubApp struct {
	// Tokens caches installation tokens until 80 % of their lifetime has
	// passed; nil fetches a token every time.
	Tokens *cache.TokenCache
	// Kind, Name and Namespace are the object's.
	Kind, Name, Namespace string
	// Timeout bounds the exchange, as it bounds the repository's other
	// network calls; zero means DefaultTimeout.
	Timeout time.Duration
}

// Credentials exchanges the GitHub App of a Git Secret (githubAppID,
// githubAppInstallationID or githubAppInstallationOwner,
// githubAppPrivateKey, and githubAppBaseURL for GitHub Enterprise: Flux's
// keys) for an installation token, and returns the Secret's data with
// that token as username x-access-token and password, ready for NewRemote.
// The token comes from the cache while it is fresh, so a token is
// refreshed before it expires and not fetched for every run. rawURL must
// be https:// (or http://). Errors wrap ErrInvalidSecret for a Secret that
// cannot work and ErrAuthentication for a refused exchange; they never
// hold the key or a token.
func (a GitHubApp) Credentials(ctx context.Context, rawURL string, data map[string][]byte) (map[string][]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parsing Git URL: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("%w: a GitHub App authenticates https:// URLs, not %s://", ErrInvalidSecret, u.Scheme)
	}
	for _, key := range []string{SecretUsername, SecretPassword, SecretBearerToken, SecretIdentity} {
		if len(data[key]) > 0 {
			return nil, fmt.Errorf("%w: both %s and %s are set", ErrInvalidSecret, githubapp.KeyAppID, key)
		}
	}
	opts := []githubapp.OptFunc{githubapp.WithAppData(data)}
	if a.Tokens != nil {
		opts = append(opts, githubapp.WithCache(a.Tokens, a.Kind, a.Name, a.Namespace, "git"))
	}
	client, err := githubapp.New(opts...)
	if err != nil {
		// New's errors name the missing or unparsable key, never its value.
		return nil, fmt.Errorf("%w: GitHub App: %w", ErrInvalidSecret, err)
	}
	timeout := cmp.Or(a.Timeout, DefaultTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	token, err := client.GetToken(ctx)
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("%w: getting a GitHub App installation token from %s gave no answer within %s", ErrTimeout, apiHost(data), timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: getting a GitHub App installation token: %w", ErrAuthentication, err)
	}
	creds := maps.Clone(data)
	for _, key := range []string{githubapp.KeyAppID, githubapp.KeyAppInstallationID, githubapp.KeyAppInstallationOwner, githubapp.KeyAppPrivateKey, githubapp.KeyAppBaseURL} {
		delete(creds, key)
	}
	creds[SecretUsername] = []byte(githubapp.AccessTokenUsername)
	creds[SecretPassword] = []byte(token.Token)
	return creds, nil
}

// apiHost is the host of the GitHub API a GitHub App Secret names
// (githubAppBaseURL), GitHub's own when it names none.
func apiHost(data map[string][]byte) string {
	u, err := url.Parse(cmp.Or(string(data[githubapp.KeyAppBaseURL]), forge.DefaultGitHubURL))
	if err != nil {
		return string(data[githubapp.KeyAppBaseURL])
	}
	return u.Host
}
