package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// listenIP returns the IP address of address (host:port), which must be
// an IP address, as a listener's is.
func listenIP(address string) (net.IP, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("reading the dashboard's address %q: %w", address, err)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("reading the dashboard's address %q: %q is not an IP address", address, host)
	}
	return ip, nil
}

// allowedHost says whether host (a Host header) names the address the
// server listens on: that address itself; on a loopback address, also
// localhost and any loopback address; on an unspecified address (0.0.0.0,
// ::), which is every address of the machine, localhost or any IP
// address. A DNS name other than localhost is never answered, as DNS
// rebinding needs one.
func (s *Server) allowedHost(host string) bool {
	if host == s.o.Address {
		return true
	}
	name, _, err := net.SplitHostPort(host)
	if err != nil {
		name = host
	}
	ip := net.ParseIP(strings.Trim(name, "[]"))
	switch {
	case ip != nil && ip.Equal(s.ip):
		return true
	case s.ip.IsLoopback():
		return name == "localhost" || (ip != nil && ip.IsLoopback())
	case s.ip.IsUnspecified():
		return name == "localhost" || ip != nil
	default:
		return false
	}
}

// authorized says whether r may be answered: when the server has a token,
// r carries it as a bearer token or in the cookie. A request that carries
// it as the query parameter `token` gets the cookie and is sent on to the
// same path without it (so that it leaves the address bar and history);
// one without it is refused. It writes the answer to requests it does not
// authorize.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.o.Token == "" {
		return true
	}
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.isToken(bearer) {
		return true
	}
	if c, err := r.Cookie(tokenCookie); err == nil && s.isToken(c.Value) {
		return true
	}
	query := r.URL.Query()
	if s.isToken(query.Get("token")) {
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: s.o.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		query.Del("token")
		// One leading slash, and the path escaped: "//host", or "/\host"
		// which a browser reads as "//host", would send it elsewhere.
		target := url.URL{Path: "/" + strings.TrimLeft(r.URL.Path, "/"), RawQuery: query.Encode()}
		http.Redirect(w, r, target.String(), http.StatusSeeOther)
		return false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="uprev dashboard"`)
	http.Error(w, "this dashboard needs the token `uprev dashboard` printed when it started: open the address it printed (?token=...), or send the header Authorization: Bearer <token>", http.StatusUnauthorized)
	return false
}

// isToken says, in constant time, whether t is the server's token.
func (s *Server) isToken(t string) bool {
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(s.o.Token)) == 1
}

// NewToken returns a new random token for Options.Token: 32 bytes from
// crypto/rand, base64url without padding.
func NewToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making the dashboard's token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// NeedsToken says whether a server listening on address (an IP address
// and port) needs Options.Token: when the address is not loopback.
func NeedsToken(address string) (bool, error) {
	ip, err := listenIP(address)
	if err != nil {
		return false, err
	}
	return !ip.IsLoopback(), nil
}
