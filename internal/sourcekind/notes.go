package sourcekind

import (
	"strings"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/source"
)

// NotesReaders read what a pull request body says of a ReleaseSource's
// update (Kind.Notes), each through the outbound layer.
type NotesReaders struct {
	// Fetcher reads releases from forges' APIs, and keeps what is read of
	// a source per change and credentials (notes.Fetcher.Remember).
	Fetcher *notes.Fetcher
	// Sources reads Helm repositories' indexes and JSON documents, with a
	// source's credentials, on its own host only, as a scan does.
	Sources *source.Client
	// GitHub is the API that serves the releases of repositories on
	// github.com (notes.GitHubAPI, unless configured otherwise), for
	// githubReleases sources that name no API.
	GitHub notes.API
	// APIFor is the API that serves the releases of a chart's source
	// repository (its web address): none for a host it does not know.
	APIFor func(source string) notes.API
}

// rememberKey is the key under which the notes of a change of a source
// read with access are kept: the kind, what it reads, the credentials
// and the new version.
func rememberKey(kind string, access source.Access, parts ...string) string {
	return kind + "\x00" + access.Fingerprint() + "\x00" + strings.Join(parts, "\x00")
}

// withSecret returns api with the credentials of a source's Secret (Flux's
// keys: bearerToken, or username and password).
func withSecret(api notes.API, secret map[string][]byte) notes.API {
	if token := secret[gitrepo.SecretBearerToken]; len(token) > 0 {
		api.Token = string(token)
		return api
	}
	if user := secret[gitrepo.SecretUsername]; len(user) > 0 {
		api.Username, api.Password = string(user), string(secret[gitrepo.SecretPassword])
	}
	return api
}
