// Package proxy starts an HTTP forward proxy for tests of proxySecretRef:
// it wants its own basic credentials and counts the requests it passes
// on. It forwards plain-HTTP requests only (no CONNECT), which is what
// clients send it for http:// servers such as the test registry and Git
// server.
package proxy

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"sync/atomic"
	"testing"
)

// Proxy is a running forward proxy.
type Proxy struct {
	// URL is the proxy's address, http://127.0.0.1:<port>.
	URL       string
	forwarded atomic.Int64
}

// Start starts a proxy that requires username and password, stopped when
// the test ends.
func Start(t testing.TB, username, password string) *Proxy {
	t.Helper()
	p := &Proxy{}
	forward := &httputil.ReverseProxy{Rewrite: func(*httputil.ProxyRequest) {}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodConnect {
			http.Error(w, "no CONNECT here", http.StatusMethodNotAllowed)
			return
		}
		probe := &http.Request{Header: http.Header{"Authorization": req.Header["Proxy-Authorization"]}}
		if user, pass, ok := probe.BasicAuth(); !ok || user != username || pass != password {
			w.Header().Set("Proxy-Authenticate", `Basic realm="proxy"`)
			http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
			return
		}
		p.forwarded.Add(1)
		forward.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Forwarded is the number of requests passed on.
func (p *Proxy) Forwarded() int64 {
	return p.forwarded.Load()
}
