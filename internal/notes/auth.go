package notes

import (
	"net/http"
	"net/url"
	"strings"
)

// hostBound is the transport of one API's calls: credentials reach the
// API's own host only. A request to another host (a redirect, a file's
// download address in an answer) goes without the Authorization and
// PRIVATE-TOKEN headers the forge's SDK set, whichever way it set them; a
// request to the API's host gets the API's username and password, when it
// has them instead of a token.
type hostBound struct {
	host string
	api  API
	next http.RoundTripper
}

// withCredentials returns a copy of client whose requests carry api's
// credentials to api's host only.
func withCredentials(client *http.Client, api API) *http.Client {
	host := ""
	if u, err := url.Parse(api.URL); err == nil {
		host = u.Host
	}
	c := *client
	c.Transport = hostBound{host: strings.ToLower(host), api: api, next: client.Transport}
	return &c
}

// RoundTrip sends req with the credentials its host may have.
func (t hostBound) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if t.host == "" || strings.ToLower(req.URL.Host) != t.host {
		req.Header.Del("Authorization")
		req.Header.Del("Private-Token")
		return t.next.RoundTrip(req)
	}
	if t.api.Token == "" && t.api.Username != "" && req.Header.Get("Authorization") == "" {
		req.SetBasicAuth(t.api.Username, t.api.Password)
	}
	return t.next.RoundTrip(req)
}
