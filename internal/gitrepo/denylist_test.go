package gitrepo_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestDeniedAddressesAreNeverDialled: over HTTP and SSH, with --registry-deny-cidrs covering
// the Git server's address, a clone is refused before any request reaches
// the server, naming the address and the range; with the list emptied, the
// same clone works.
func TestDeniedAddressesAreNeverDialled(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app.yaml": "a: 1\n"})
	deny, err := outbound.Parse([]string{"127.0.0.0/8", "::1/128"})
	g.Expect(err).NotTo(HaveOccurred())
	outbound.Install(deny)
	t.Cleanup(func() { outbound.Install(nil) })

	_, err = newCache(t).Open(context.Background(), newRemote(t, url, nil), gitrepo.OpenOptions{Branch: "main"})
	g.Expect(err).To(MatchError(outbound.ErrDenied))
	g.Expect(err.Error()).To(ContainSubstring("127.0.0.0/8"))
	g.Expect(srv.Counts().UploadPack).To(BeZero(), "the Git server got a request")

	sshRemote := newRemote(t, srv.SSHURL("fleet"), map[string][]byte{
		"identity":    srv.ClientKeyPEM(),
		"known_hosts": srv.KnownHosts(),
	})
	_, err = newCache(t).Open(context.Background(), sshRemote, gitrepo.OpenOptions{Branch: "main"})
	g.Expect(err).To(MatchError(outbound.ErrDenied), "over SSH")

	outbound.Install(nil)
	s, err := newCache(t).Open(context.Background(), newRemote(t, url, nil), gitrepo.OpenOptions{Branch: "main"})
	g.Expect(err).NotTo(HaveOccurred())
	s.Close()
	s, err = newCache(t).Open(context.Background(), sshRemote, gitrepo.OpenOptions{Branch: "main"})
	g.Expect(err).NotTo(HaveOccurred(), "over SSH")
	s.Close()
	g.Expect(srv.Counts().UploadPack).To(BeNumerically(">", 0))
}
