package gitrepo_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// releaseCount is how many tags a taggedRepo has.
const releaseCount = 20

// taggedRepo starts a Git server with a repository of 2,000 files whose
// main branch carries releaseCount tags, v01 to v20, each on a commit that
// changes one file, and returns its Remote.
func taggedRepo(b *testing.B) *gitrepo.Remote {
	b.Helper()
	srv := gitserver.Start(b)
	files := make(map[string]string, 2000)
	for i := range 2000 {
		files[fmt.Sprintf("clusters/c%02d/app%03d.yaml", i/100, i%100)] = fmt.Sprintf(
			"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app%d\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: ghcr.io/acme/app%d:1.0.0\n", i, i)
	}
	url := srv.InitRepo(b, "fleet", "main", files)
	for i := 1; i <= releaseCount; i++ {
		srv.CommitFile(b, "fleet", "main", fmt.Sprintf("clusters/c%02d/app000.yaml", i), fmt.Sprintf("image: ghcr.io/acme/app:1.%d.0\n", i), "Release")
		srv.Git(b, "fleet", "tag", releaseTag(i))
	}
	return newRemote(b, url, nil)
}

// releaseTag returns the name of the i-th tag of a taggedRepo.
func releaseTag(i int) string {
	return fmt.Sprintf("v%02d", i)
}

// BenchmarkSyncThroughTags moves one Sync-like owner of a 2,000-file
// repository through 20 tags, one session per tag, and reports the disk the
// clone cache takes then, in bytes and relative to the disk of one clone
// (the cache after the first tag).
func BenchmarkSyncThroughTags(b *testing.B) {
	remote := taggedRepo(b)
	ctx := context.Background()
	var oneClone, total int64
	for b.Loop() {
		root := filepath.Join(b.TempDir(), "clones")
		cache, err := gitrepo.NewCache(root)
		if err != nil {
			b.Fatal(err)
		}
		for i := 1; i <= releaseCount; i++ {
			s, _, err := cache.OpenRevision(ctx, remote, gitrepo.Ref{Tag: releaseTag(i)}, "Sync/bench/app")
			if err != nil {
				b.Fatal(err)
			}
			s.Close()
			if i == 1 {
				oneClone, _ = diskUsage(b, root)
			}
		}
		total, _ = diskUsage(b, root)
	}
	b.ReportMetric(float64(oneClone), "one-clone-bytes")
	b.ReportMetric(float64(total), "disk-bytes")
	b.ReportMetric(float64(total)/float64(oneClone), "disk/one-clone")
}

// BenchmarkHundredSyncsCreatedAndDeleted has 100 Sync-like owners of a
// 2,000-file repository, pinned to its branch, its 20 tags and one commit,
// each open a session once and be released, as a deleted Sync is; then the
// clock moves on 30 seconds and the cache sweeps. It reports the disk the
// cache took before the sweep and what it keeps after it: bytes, and kept
// clones.
func BenchmarkHundredSyncsCreatedAndDeleted(b *testing.B) {
	remote := taggedRepo(b)
	ctx := context.Background()
	var used, left int64
	var clones int
	for b.Loop() {
		root := filepath.Join(b.TempDir(), "clones")
		clock := testingclock.NewFakeClock(time.Now())
		cache, err := gitrepo.NewCacheWithOptions(root, gitrepo.CacheOptions{Clock: clock})
		if err != nil {
			b.Fatal(err)
		}
		var commit string
		for i := range 100 {
			ref := gitrepo.Ref{Tag: releaseTag(i%releaseCount + 1)}
			switch {
			case i%10 == 0:
				ref = gitrepo.Ref{Branch: "main"}
			case i%10 == 5 && commit != "":
				ref = gitrepo.Ref{Commit: commit}
			}
			s, _, err := cache.OpenRevision(ctx, remote, ref, fmt.Sprintf("Sync/bench/s%03d", i))
			if err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				commit = s.Head()
			}
			s.Close()
		}
		used, _ = diskUsage(b, root)
		for i := range 100 {
			cache.Release(fmt.Sprintf("Sync/bench/s%03d", i))
		}
		clock.Step(30 * time.Second)
		if err := cache.Sweep(clock.Now()); err != nil {
			b.Fatal(err)
		}
		left, _ = diskUsage(b, root)
		clones = keptClones(b, root)
	}
	b.ReportMetric(float64(used), "disk-bytes")
	b.ReportMetric(float64(left), "bytes-left")
	b.ReportMetric(float64(clones), "clones-left")
}

// keptClones returns how many working trees, directories with a .git, the
// clone cache at root holds.
func keptClones(b *testing.B, root string) int {
	b.Helper()
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			n++
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		b.Fatalf("counting the clones under %s: %v", root, err)
	}
	return n
}
