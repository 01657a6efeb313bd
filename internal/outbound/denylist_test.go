package outbound

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

func TestCheck(t *testing.T) {
	g := NewWithT(t)
	d, err := Parse([]string{"169.254.0.0/16", " fd00:ec2::254/128", "", "127.0.0.0/8"})
	g.Expect(err).NotTo(HaveOccurred())
	for addr, denied := range map[string]bool{
		"169.254.169.254":    true,
		"::ffff:169.254.1.1": true,
		"fd00:ec2::254":      true,
		"127.0.0.1":          true,
		"10.0.0.1":           false,
		"fd00:ec2::253":      false,
	} {
		err := d.Check(netip.MustParseAddr(addr))
		if denied {
			g.Expect(err).To(MatchError(ErrDenied), addr)
		} else {
			g.Expect(err).NotTo(HaveOccurred(), addr)
		}
	}
	_, err = Parse([]string{"169.254.0.0/33"})
	g.Expect(err).To(HaveOccurred())
}

// TestDialContextRefusesADeniedAddress dials a server that is listening:
// the connection is refused by the check, and the server sees no request.
func TestDialContextRefusesADeniedAddress(t *testing.T) {
	g := NewWithT(t)
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests++ }))
	t.Cleanup(srv.Close)
	d, err := Parse([]string{"127.0.0.0/8", "::1/128"})
	g.Expect(err).NotTo(HaveOccurred())
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext(net.Dialer{})}}
	resp, err := client.Get(srv.URL)
	g.Expect(err).To(MatchError(ErrDenied))
	if err == nil {
		g.Expect(resp.Body.Close()).To(Succeed())
	}
	g.Expect(requests).To(BeZero())

	open := &http.Client{Transport: &http.Transport{DialContext: Denylist(nil).DialContext(net.Dialer{})}}
	resp, err = open.Get(srv.URL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Body.Close()).To(Succeed())
}
