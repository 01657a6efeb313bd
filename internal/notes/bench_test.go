package notes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
)

// BenchmarkNotesFetches counts the requests release notes cost: 50 sources
// of 250 releases each (three pages of 100); half the updates go from the
// newest release's predecessor (the old version is on the first page),
// half from an old version on the third page. Each iteration is one round
// of pull request bodies asking the notes of every update again, as runs
// do, with the manager's one Fetcher: the first round reads each page
// once, later rounds none.
//
// pages/update is the requests per source and version pair over all the
// rounds (1 or 3 for the pair, whatever b.N is); pages/round the requests
// per round.
func BenchmarkNotesFetches(b *testing.B) {
	const sources, releases = 50, 250
	gh := githubapi.StartReleases(b)
	var list []githubapi.Release
	for i := releases; i > 0; i-- {
		list = append(list, githubapi.Release{TagName: fmt.Sprintf("v1.%d.0", i), Body: fmt.Sprintf("notes of 1.%d.0", i)})
	}
	for s := range sources {
		gh.SetReleases(fmt.Sprintf("acme/app%d", s), list...)
	}
	f := NewFetcher(outbound.Denylist{}.Client(10*time.Second), nil)
	api := API{URL: gh.URL}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		for s := range sources {
			old := fmt.Sprintf("1.%d.0", releases-1)
			if s%2 == 1 {
				old = "1.10.0"
			}
			got, err := f.Releases(ctx, api, fmt.Sprintf("https://github.com/acme/app%d", s), old, fmt.Sprintf("1.%d.0", releases))
			if err != nil || len(got) == 0 {
				b.Fatalf("source %d: %d releases, %v", s, len(got), err)
			}
		}
	}
	b.ReportMetric(float64(f.Pages())/sources, "pages/update")
	b.ReportMetric(float64(f.Pages())/float64(b.N), "pages/round")
	b.ReportMetric(float64(len(gh.Requests()))/sources, "requests/update")
}
