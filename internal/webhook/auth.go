package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
)

// ErrUnauthenticated is returned for a request without valid credentials.
var ErrUnauthenticated = errors.New("not authenticated")

// Headers that carry credentials.
const (
	// SignatureHeader carries `sha256=<hex HMAC-SHA256 of the body>`, as
	// GitHub, Gitea and Forgejo send it.
	SignatureHeader = "X-Hub-Signature-256"
	// GitLabTokenHeader carries the token itself, as GitLab sends it.
	GitLabTokenHeader = "X-Gitlab-Token"
)

// Authenticate checks the credentials of a request to the receiver of kind
// and namespace against token. The first of these that the request carries
// is checked, and must be valid: the X-Hub-Signature-256 signature of body,
// the X-Gitlab-Token header, an `Authorization: Bearer` token, or pathKey
// (the last segment of the path, see PathKey). Every comparison takes
// constant time. The error wraps ErrUnauthenticated and never holds a
// credential.
func Authenticate(h http.Header, body []byte, pathKey string, token []byte, kind, namespace string) error {
	if len(token) == 0 {
		return errors.Join(ErrUnauthenticated, errors.New("the receiver has no token"))
	}
	switch {
	case h.Get(SignatureHeader) != "":
		hexSig, ok := strings.CutPrefix(h.Get(SignatureHeader), "sha256=")
		sig, err := hex.DecodeString(hexSig)
		if !ok || err != nil || !hmac.Equal(sig, mac(token, body)) {
			return errors.Join(ErrUnauthenticated, errors.New("signature does not match"))
		}
	case h.Get(GitLabTokenHeader) != "":
		if !equalSecrets([]byte(h.Get(GitLabTokenHeader)), token) {
			return errors.Join(ErrUnauthenticated, errors.New("token does not match"))
		}
	case h.Get("Authorization") != "":
		bearer, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
		if !ok || !equalSecrets([]byte(strings.TrimSpace(bearer)), token) {
			return errors.Join(ErrUnauthenticated, errors.New("bearer token does not match"))
		}
	case pathKey != "":
		if !equalSecrets([]byte(pathKey), []byte(PathKey(token, kind, namespace))) {
			return errors.Join(ErrUnauthenticated, errors.New("path key does not match"))
		}
	default:
		return errors.Join(ErrUnauthenticated, errors.New("no credentials"))
	}
	return nil
}

// HasCredentials reports whether a request with headers h and path key
// pathKey carries any credentials Authenticate checks; one without is
// refused before its receiver's token or its body is read.
func HasCredentials(h http.Header, pathKey string) bool {
	return h.Get(SignatureHeader) != "" || h.Get(GitLabTokenHeader) != "" || h.Get("Authorization") != "" || pathKey != ""
}

// SignsBody reports whether Authenticate checks the request's body (an
// X-Hub-Signature-256 signature); otherwise it checks a token in a header
// or the path, and the body is read only once that succeeded.
func SignsBody(h http.Header) bool {
	return h.Get(SignatureHeader) != ""
}

// Sign returns the X-Hub-Signature-256 value of body under token.
func Sign(token, body []byte) string {
	return "sha256=" + hex.EncodeToString(mac(token, body))
}

// PathKey returns the path key of the receiver of kind and namespace, for
// senders that cannot set headers: hex(HMAC-SHA256(token,
// "<kind>/<namespace>")). It is a secret: whoever knows the URL can trigger
// the receiver.
func PathKey(token []byte, kind, namespace string) string {
	return hex.EncodeToString(mac(token, []byte(kind+"/"+namespace)))
}

func mac(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

// equalSecrets compares a and b in time independent of their content and
// length, by comparing their hashes.
func equalSecrets(a, b []byte) bool {
	ha, hb := sha256.Sum256(a), sha256.Sum256(b)
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
