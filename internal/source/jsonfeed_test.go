package source

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
)

// linkerdFeed is Linkerd's version.json.
const linkerdFeed = `{"stable":"stable-2.14.10","edge":"edge-24.11.8"}`

func TestListJSONReadsAFeed(t *testing.T) {
	g := NewWithT(t)
	srv, _, _ := startHelmRepository(t, map[string]string{"version.json": linkerdFeed})
	listing, err := NewClient(Options{}).ListJSON(context.Background(), "ns/linkerd", Access{}, srv.URL+"/version.json", "{.edge}")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listing.Names()).To(Equal([]string{"edge-24.11.8"}))

	v, err := Select(imagev1.ImagePolicyChoice{Alphabetical: &imagev1.AlphabeticalPolicy{}},
		&imagev1.TagFilter{Pattern: `^edge-(?P<v>.*)$`, Extract: "$v"}, listing.Versions)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Version).To(Equal("edge-24.11.8"))
}

func TestListJSONManyValuesWithoutBraces(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"releases":[{"version":"1.2.0"},{"version":"1.10.0"},{"version":"1.9.3"}]}`)
	}))
	t.Cleanup(srv.Close)
	listing, err := NewClient(Options{}).ListJSON(context.Background(), "ns/feed", Access{}, srv.URL, ".releases[*].version")
	g.Expect(err).NotTo(HaveOccurred())
	v, err := Select(imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: "1.x"}}, nil, listing.Versions)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Version).To(Equal("1.10.0"))
}

func TestListJSONErrors(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"edge":{"nested":true}}`)
	}))
	t.Cleanup(srv.Close)
	c := NewClient(Options{})
	_, err := c.ListJSON(context.Background(), "ns/feed", Access{}, srv.URL, "{.edge")
	g.Expect(errors.Is(err, ErrInvalidConfig)).To(BeTrue(), "%v", err)
	_, err = c.ListJSON(context.Background(), "ns/feed", Access{}, srv.URL, "{.stable}")
	g.Expect(errors.Is(err, ErrNotListed)).To(BeTrue(), "%v", err)
	_, err = c.ListJSON(context.Background(), "ns/feed", Access{}, srv.URL, "{.edge}")
	g.Expect(errors.Is(err, ErrInvalidResponse)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("not a version string"))
}
