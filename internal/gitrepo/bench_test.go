package gitrepo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// largeRepoFiles returns 5,000 small YAML files in 50 directories.
func largeRepoFiles() map[string]string {
	files := make(map[string]string, 5000)
	for i := range 5000 {
		files[fmt.Sprintf("clusters/c%02d/app%03d.yaml", i/100, i%100)] = fmt.Sprintf(
			"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app%d\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: ghcr.io/acme/app%d:1.0.0 # {\"$imagepolicy\": \"apps:app%d\"}\n", i, i, i)
	}
	return files
}

// BenchmarkWriteBack measures one write-back run on a warm kept clone of a
// 5,000-file repository: fetch, edit 50 files, commit, push over HTTP.
func BenchmarkWriteBack(b *testing.B) {
	srv := gitserver.Start(b)
	remote := newRemote(b, srv.InitRepo(b, "fleet", "main", largeRepoFiles()), nil)
	cache := newCache(b)
	open(b, cache, remote, "main", "").Close() // warm the kept clone
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		s, err := cache.Open(ctx, remote, gitrepo.OpenOptions{Branch: "main"})
		if err != nil {
			b.Fatal(err)
		}
		edits := make(map[string]string, 50)
		for f := range 50 {
			edits[fmt.Sprintf("clusters/c%02d/app%03d.yaml", f, f)] = fmt.Sprintf("image: ghcr.io/acme/app%d:1.0.%d\n", f, i+1)
		}
		sha, err := s.WriteBack(ctx, author, writeFiles(edits))
		s.Close()
		if err != nil || sha == "" {
			b.Fatalf("writing back: %q, %v", sha, err)
		}
	}
}

// BenchmarkConcurrentUsers20 measures 20 concurrent users of one repository
// on a cold cache, each opening a session (a fetch) and writing back nothing.
func BenchmarkConcurrentUsers20(b *testing.B) {
	srv := gitserver.Start(b)
	remote := newRemote(b, srv.InitRepo(b, "fleet", "main", largeRepoFiles()), nil)
	ctx := context.Background()
	var clones, fetches int64
	b.ResetTimer()
	for b.Loop() {
		cache := newCache(b)
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				s, err := cache.Open(ctx, remote, gitrepo.OpenOptions{Branch: "main"})
				if err != nil {
					b.Error(err)
					return
				}
				defer s.Close()
				if _, err := s.WriteBack(ctx, author, func(string, *gitrepo.History) (gitrepo.Edit, error) { return gitrepo.Edit{}, nil }); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		stats := cache.Stats()
		clones += stats.Clones
		fetches += stats.Fetches
	}
	b.ReportMetric(float64(clones)/float64(b.N), "clones/op")
	b.ReportMetric(float64(fetches)/float64(b.N), "fetches/op")
}
