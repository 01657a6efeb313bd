package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
)

// A feed that never ends its body (no Content-Length, JSON whitespace
// forever) is refused at the bound, not read to the end of memory.
func TestEndlessFeedIsRefusedAtTheBound(t *testing.T) {
	g := NewWithT(t)
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n, _ := io.WriteString(w, `{"edge":"edge-24.11.8"`)
		written.Add(int64(n))
		pad := []byte(strings.Repeat(" ", 64<<10))
		for r.Context().Err() == nil {
			n, err := w.Write(pad)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)

	_, err := NewClient(Options{}).ListJSON(context.Background(), "ns/feed", Access{}, srv.URL+"/version.json", "{.edge}")
	g.Expect(errors.Is(err, ErrInvalidResponse)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("bound of %d bytes", DefaultMaxBytes))
	srv.CloseClientConnections()
	g.Expect(written.Load()).To(BeNumerically("<", 2*DefaultMaxBytes), "the feed was read past its bound")
}

// A releases API whose pages never end (every page links a next one) is
// read for MaxReleasePages pages only: the newest 1,000 releases, then the
// scan stops asking.
func TestEndlessReleasePagesStopAtTheBound(t *testing.T) {
	g := NewWithT(t)
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		page = max(page, 1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Link", fmt.Sprintf(`<%s/repos/o/r/releases?per_page=100&page=%d>; rel="next"`, "http://"+r.Host, page+1))
		releases := make([]string, 100)
		for i := range releases {
			releases[i] = fmt.Sprintf(`{"tag_name":"v%d.%d.0"}`, page, i)
		}
		_, _ = io.WriteString(w, "["+strings.Join(releases, ",")+"]")
	}))
	t.Cleanup(srv.Close)

	listing, err := NewClient(Options{}).ListGitHubReleases(context.Background(), "ns/gh", Access{}, srv.URL, "o/r")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listing.Versions).To(HaveLen(100 * MaxReleasePages))
	g.Expect(requests.Load()).To(Equal(int64(MaxReleasePages)))
}
