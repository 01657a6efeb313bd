package gitrepo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// sentinel is the content of the files a crafted commit tries to replace.
const sentinel = "untouched\n"

// craftedEntries are the entries an attacker who pushes to a Git server
// that does not fsck could put in a tree, each aiming at a file beyond
// the working tree: the file `sentinel` next to the clone, or the clone's
// .git. path is where the clone must report it.
var craftedEntries = map[string]struct {
	entries []gitserver.TreeEntry
	path    string
}{
	"dot-dot directory": {[]gitserver.TreeEntry{{Name: "..", Entries: []gitserver.TreeEntry{{Name: "sentinel", Content: "pwned\n"}}}}, ".."},
	"name with slashes": {[]gitserver.TreeEntry{{Name: "../sentinel", Content: "pwned\n"}}, "../sentinel"},
	"dot-dot deeper down": {[]gitserver.TreeEntry{{Name: "apps", Entries: []gitserver.TreeEntry{
		{Name: "..", Entries: []gitserver.TreeEntry{{Name: "..", Entries: []gitserver.TreeEntry{{Name: "sentinel", Content: "pwned\n"}}}}},
	}}}, "apps/.."},
	".git directory": {[]gitserver.TreeEntry{{Name: ".git", Entries: []gitserver.TreeEntry{
		{Name: "commondir", Content: "../../elsewhere\n"}, {Name: "config", Content: "[core]\n\tworktree = /\n"},
	}}}, ".git"},
	".GIT directory": {[]gitserver.TreeEntry{{Name: ".GIT", Entries: []gitserver.TreeEntry{{Name: "config", Content: "[core]\n\tworktree = /\n"}}}}, ".GIT"},
	"link and directory of one name": {[]gitserver.TreeEntry{
		{Name: "apps", Link: ".."}, {Name: "apps", Entries: []gitserver.TreeEntry{{Name: "sentinel", Content: "pwned\n"}}},
	}, "apps"},
	"absolute name": {[]gitserver.TreeEntry{{Name: "/sentinel", Content: "pwned\n"}}, "/sentinel"},
	"backslash":     {[]gitserver.TreeEntry{{Name: `..\sentinel`, Content: "pwned\n"}}, `..\sentinel`},
}

// outside is what a crafted commit aims at beyond a kept clone's working
// tree.
type outside struct {
	paths []string
	files map[string]string
}

// watchOutside puts the sentinel next to the kept clone at dir and returns
// the files beyond its working tree that a crafted commit aims at, as they
// are now: the sentinel, and the files gitFiles of the clone's .git.
func watchOutside(t *testing.T, dir string, gitFiles ...string) outside {
	t.Helper()
	g := NewWithT(t)
	g.Expect(os.WriteFile(filepath.Join(filepath.Dir(dir), "sentinel"), []byte(sentinel), 0o644)).To(Succeed())
	o := outside{paths: []string{filepath.Join(filepath.Dir(dir), "sentinel")}}
	for _, f := range gitFiles {
		o.paths = append(o.paths, filepath.Join(dir, ".git", f))
	}
	o.files = o.read()
	return o
}

func (o outside) read() map[string]string {
	files := map[string]string{}
	for _, p := range o.paths {
		content, err := os.ReadFile(p)
		if err != nil {
			files[p] = err.Error()
			continue
		}
		files[p] = string(content)
	}
	return files
}

// expectUnchanged checks that no file beyond the working tree changed.
func (o outside) expectUnchanged(g *WithT) {
	g.Expect(o.read()).To(Equal(o.files), "nothing outside the working tree changes")
}

// expectBadCommit checks that err is the *gitrepo.BadCommitError naming
// commit and path.
func expectBadCommit(g *WithT, err error, commit, path string) {
	var bad *gitrepo.BadCommitError
	g.Expect(errors.As(err, &bad)).To(BeTrue(), "a BadCommitError: %v", err)
	g.Expect(bad.Commit).To(Equal(commit))
	g.Expect(bad.Path).To(Equal(path))
}

func TestCraftedTreeIsRefusedOnAnIncrementalFetch(t *testing.T) {
	for name, tc := range craftedEntries {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			fleet := newKeptFleet(t)
			srv, remote, cache, dir := fleet.srv, fleet.remote, fleet.cache, fleet.dir
			watched := watchOutside(t, dir, "commondir", "config")

			bad := srv.CommitTree(t, "fleet", "main", false, tc.entries...)
			for range 2 {
				_, err := cache.Open(context.Background(), remote, gitrepo.OpenOptions{Branch: "main"})
				watched.expectUnchanged(g)
				expectBadCommit(g, err, bad, tc.path)
			}
		})
	}
}

func TestCraftedTreeIsRefusedOnAFreshCheckout(t *testing.T) {
	for name, tc := range craftedEntries {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			fleet := newKeptFleet(t)
			srv, remote, cache, dir := fleet.srv, fleet.remote, fleet.cache, fleet.dir
			// The fresh clone has a new object store, named in .git/commondir.
			watched := watchOutside(t, dir, "config")

			// A commit that does not descend from the tip: the branch was
			// rewritten, so the kept clone is replaced by a fresh one.
			bad := srv.CommitTree(t, "fleet", "main", true, tc.entries...)
			for range 2 {
				_, err := cache.Open(context.Background(), remote, gitrepo.OpenOptions{Branch: "main"})
				watched.expectUnchanged(g)
				expectBadCommit(g, err, bad, tc.path)
			}
		})
	}
}

func TestCraftedTreePushedDuringAPushRaceIsRefused(t *testing.T) {
	g := NewWithT(t)
	var srv *gitserver.Server
	var bad string
	srv = gitserver.Start(t, gitserver.WithBeforePush(func(repo string) {
		if bad == "" {
			bad = srv.CommitTree(t, repo, "main", false, craftedEntries["dot-dot directory"].entries...)
		}
	}))
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	cache := newCache(t)
	s := open(t, cache, remote, "main", "")
	watched := watchOutside(t, s.Dir(), "commondir", "config")

	_, err := s.WriteBack(context.Background(), author, writeFiles(map[string]string{"clusters/prod/agent.yaml": "image: ghcr.io/acme/agent:1.4.2\n"}))
	watched.expectUnchanged(g)
	expectBadCommit(g, err, bad, "..")
	g.Expect(srv.Log(t, "fleet", "main")[0].SHA).To(Equal(bad), "nothing is pushed on top of the crafted commit")
}
