package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
)

func TestListHelmChartSelectsWithThePolicy(t *testing.T) {
	g := NewWithT(t)
	srv, _, _ := startHelmRepository(t, map[string]string{
		"index.yaml": helmIndex("podinfo", "6.5.0", "6.5.4", "6.6.0-rc.1", "7.0.0") + "\n",
	})
	c := NewClient(Options{})
	listing, err := c.ListHelmChart(context.Background(), "ns/podinfo", Access{}, srv.URL, "podinfo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listing.Names()).To(ConsistOf("6.5.0", "6.5.4", "6.6.0-rc.1", "7.0.0"))

	v, err := Select(imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: "6.x"}}, nil, listing.Versions)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Version).To(Equal("6.5.4"))
	g.Expect(v.URL).To(Equal(srv.URL + "/podinfo-6.5.4.tgz"))
	g.Expect(v.Digest).To(Equal("sha256:0000000000000000000000000000000000000000000000000000000000000005"))
}

func TestListHelmChartNotInIndex(t *testing.T) {
	g := NewWithT(t)
	srv, _, _ := startHelmRepository(t, map[string]string{"index.yaml": helmIndex("podinfo", "6.5.0")})
	_, err := NewClient(Options{}).ListHelmChart(context.Background(), "ns/x", Access{}, srv.URL, "nginx")
	g.Expect(errors.Is(err, ErrNotListed)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(`chart "nginx" is not in the repository's index`))
}

// An unchanged index costs one conditional request, answered 304, and
// gives the versions of the last full answer; a changed one is read again.
func TestListHelmChartUnchangedIsOneConditionalRequest(t *testing.T) {
	g := NewWithT(t)
	srv, count, dir := startHelmRepository(t, map[string]string{"index.yaml": helmIndex("podinfo", "6.5.0", "6.5.4")})
	c := NewClient(Options{})
	first, err := c.ListHelmChart(context.Background(), "ns/podinfo", Access{}, srv.URL, "podinfo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.NotModified).To(BeFalse())

	second, err := c.ListHelmChart(context.Background(), "ns/podinfo", Access{}, srv.URL, "podinfo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.NotModified).To(BeTrue())
	g.Expect(second.Names()).To(Equal(first.Names()))
	g.Expect(count.requests.Load()).To(Equal(int64(2)))
	g.Expect(count.notModified.Load()).To(Equal(int64(1)))

	index := filepath.Join(dir, "index.yaml")
	g.Expect(os.WriteFile(index, []byte(helmIndex("podinfo", "6.5.0", "6.5.4", "6.5.5")), 0o644)).To(Succeed())
	later := time.Now().Add(time.Hour)
	g.Expect(os.Chtimes(index, later, later)).To(Succeed())
	third, err := c.ListHelmChart(context.Background(), "ns/podinfo", Access{}, srv.URL, "podinfo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(third.NotModified).To(BeFalse())
	g.Expect(third.Names()).To(ContainElement("6.5.5"))

	// Forgetting the source (its object deleted) reads it in full again.
	c.Forget("ns/podinfo")
	fourth, err := c.ListHelmChart(context.Background(), "ns/podinfo", Access{}, srv.URL, "podinfo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fourth.NotModified).To(BeFalse())
}
