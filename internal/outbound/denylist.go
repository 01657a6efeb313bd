package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrDenied is wrapped by the error of a connection to a denied address.
var ErrDenied = errors.New("address is in a range the operator denies")

// Denylist is a set of address ranges that connections may not go to. The
// zero value denies nothing.
type Denylist []netip.Prefix

// Parse parses CIDRs (such as 169.254.0.0/16 or fd00:ec2::254/128) into a
// Denylist; empty entries are skipped.
func Parse(cidrs []string) (Denylist, error) {
	var d Denylist
	for _, c := range cidrs {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("parsing CIDR %q: %w", c, err)
		}
		d = append(d, p.Masked())
	}
	return d, nil
}

// Check returns an error wrapping ErrDenied when ip is in one of the
// ranges. An IPv4 address written in IPv6 form (::ffff:a.b.c.d) is checked
// as IPv4.
func (d Denylist) Check(ip netip.Addr) error {
	ip = ip.Unmap()
	for _, p := range d {
		if p.Contains(ip) {
			return fmt.Errorf("%w: %s is in %s", ErrDenied, ip, p)
		}
	}
	return nil
}

// Control is a net.Dialer Control function that refuses to connect to a
// denied address. It sees the resolved address of every connection
// attempt, after DNS.
func (d Denylist) Control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("checking the address %q: %w", address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("checking the address %q: %w", address, err)
	}
	return d.Check(ip)
}

// DialContext returns dialer's DialContext with the Denylist checked on
// every connection; dialer is copied, not changed. With an empty Denylist
// it is dialer's own.
func (d Denylist) DialContext(dialer net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	if len(d) == 0 {
		return dialer.DialContext
	}
	control := dialer.Control
	dialer.Control = func(network, address string, c syscall.RawConn) error {
		if err := d.Control(network, address, c); err != nil {
			return err
		}
		if control != nil {
			return control(network, address, c)
		}
		return nil
	}
	return dialer.DialContext
}

// Dialer returns a dialer with net/http's default timeouts whose
// connections are checked against the Denylist: the one dialer of every
// connection to a server a tenant names (HTTP, and Git over SSH).
func (d Denylist) Dialer() *net.Dialer {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if len(d) > 0 {
		dialer.Control = d.Control
	}
	return dialer
}

// Transport returns an HTTP transport with net/http's default settings
// (proxy from the environment, timeouts, HTTP/2) whose connections are
// checked against the Denylist: the base of every client that reaches a
// server a tenant names.
func (d Denylist) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.Dialer().DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Client returns an HTTP client on the Denylist's Transport whose every
// call, the reading of its body included, ends after timeout: the client of
// APIs a tenant names, such as a forge's.
func (d Denylist) Client(timeout time.Duration) *http.Client {
	c := NewClient(d.Transport(), nil)
	c.Timeout = timeout
	return c
}

// NewClient returns an HTTP client that sends its requests through rt,
// which is a Transport of this package's or wraps one, and follows
// redirects as checkRedirect says (nil: net/http's rule). It is the one
// place a client is made; Client is the usual case.
func NewClient(rt http.RoundTripper, checkRedirect func(*http.Request, []*http.Request) error) *http.Client {
	return &http.Client{Transport: rt, CheckRedirect: checkRedirect}
}
