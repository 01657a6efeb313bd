package gitrepo_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// agentBumped is the content of agentPath after the second commit of a
// revisionRepo.
const agentBumped = "image: ghcr.io/acme/agent:1.4.2\n"

// revisionRepo is a repository whose main branch holds two commits: first,
// with seedFiles, and second, which bumps agentPath to agentBumped.
type revisionRepo struct {
	srv           *gitserver.Server
	remote        *gitrepo.Remote
	first, second string
}

// newRevisionRepo starts a Git server with the revisionRepo "fleet", reached
// over HTTP without credentials.
func newRevisionRepo(t *testing.T, opts ...gitserver.Option) revisionRepo {
	t.Helper()
	srv := gitserver.Start(t, opts...)
	srv.InitRepo(t, "fleet", "main", seedFiles)
	first := srv.Log(t, "fleet", "main")[0].SHA
	second := srv.CommitFile(t, "fleet", "main", agentPath, agentBumped, "Bump agent")
	return revisionRepo{srv: srv, first: first, second: second}.withRemote(t, nil)
}

// withRemote sets the remote, with the Secret data.
func (r revisionRepo) withRemote(t *testing.T, data map[string][]byte) revisionRepo {
	t.Helper()
	r.remote = newRemote(t, r.srv.HTTPURL("fleet"), data)
	return r
}

// git runs git in the bare repository.
func (r revisionRepo) git(t *testing.T, args ...string) string {
	t.Helper()
	return r.srv.Git(t, "fleet", args...)
}

// openRevision opens a session at ref and closes it at the end of the test.
func openRevision(t *testing.T, c *gitrepo.Cache, r *gitrepo.Remote, ref gitrepo.Ref) (*gitrepo.Session, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, revision, err := c.OpenRevision(ctx, r, ref, "")
	if err != nil {
		t.Fatalf("opening session at %+v: %v", ref, err)
	}
	t.Cleanup(s.Close)
	return s, revision
}

func TestOpenRevisionBranchUsesTheBranchClone(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	cache := newCache(t)

	s, revision := openRevision(t, cache, repo.remote, gitrepo.Ref{Branch: "main"})
	g.Expect(revision).To(Equal("main@sha1:" + repo.second))
	g.Expect(s.Head()).To(Equal(repo.second))
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(agentBumped))
	dir := s.Dir()
	s.Close()

	g.Expect(open(t, cache, repo.remote, "main", "").Dir()).To(Equal(dir))
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: 1}))
}

func TestOpenRevisionTag(t *testing.T) {
	for name, tc := range map[string]struct {
		// tag tags the repository's first commit v1.0.0.
		tag func(t *testing.T, repo revisionRepo)
		// kind is the type of the object v1.0.0 names.
		kind string
	}{
		"lightweight": {
			tag:  func(t *testing.T, repo revisionRepo) { repo.git(t, "tag", "v1.0.0", repo.first) },
			kind: "commit",
		},
		"annotated": {
			tag: func(t *testing.T, repo revisionRepo) {
				repo.git(t, "tag", "-a", "v1.0.0", "-m", "Release 1.0.0", repo.first)
			},
			kind: "tag",
		},
		"annotated tag of an annotated tag": {
			tag: func(t *testing.T, repo revisionRepo) {
				repo.git(t, "tag", "-a", "rc", "-m", "Release candidate", repo.first)
				repo.git(t, "tag", "-a", "v1.0.0", "-m", "Release 1.0.0", "rc")
			},
			kind: "tag",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			repo := newRevisionRepo(t)
			tc.tag(t, repo)
			g.Expect(repo.git(t, "cat-file", "-t", "refs/tags/v1.0.0")).To(Equal(tc.kind))

			s, revision := openRevision(t, newCache(t), repo.remote, gitrepo.Ref{Tag: "v1.0.0"})
			g.Expect(revision).To(Equal("v1.0.0@sha1:" + repo.first))
			g.Expect(s.Head()).To(Equal(repo.first))
			g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
			g.Expect(readFile(g, s.Dir(), "README.md")).To(Equal(seedFiles["README.md"]))
		})
	}
}

func TestOpenRevisionFollowsMovedTag(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	repo.git(t, "tag", "-a", "v1", "-m", "Release 1", repo.first)
	cache := newCache(t)

	s, revision := openRevision(t, cache, repo.remote, gitrepo.Ref{Tag: "v1"})
	g.Expect(revision).To(Equal("v1@sha1:" + repo.first))
	s.Close()

	repo.git(t, "tag", "-f", "-a", "v1", "-m", "Release 1, again", repo.second)
	s, revision = openRevision(t, cache, repo.remote, gitrepo.Ref{Tag: "v1"})
	g.Expect(revision).To(Equal("v1@sha1:" + repo.second))
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(agentBumped))
	s.Close()

	// Back to a commit the kept clone already has: only the ref moves.
	repo.git(t, "tag", "-f", "v1", repo.first)
	s, revision = openRevision(t, cache, repo.remote, gitrepo.Ref{Tag: "v1"})
	g.Expect(revision).To(Equal("v1@sha1:" + repo.first))
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: 2}))
}

func TestOpenRevisionCommit(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	feature := repo.srv.CommitFile(t, "fleet", "feature", "feature.yaml", "a: 1\n", "Start feature")
	cache := newCache(t)

	s, revision := openRevision(t, cache, repo.remote, gitrepo.Ref{Commit: feature})
	g.Expect(revision).To(Equal("sha1:" + feature))
	g.Expect(s.Head()).To(Equal(feature))
	g.Expect(readFile(g, s.Dir(), "feature.yaml")).To(Equal("a: 1\n"))
	g.Expect(filepath.Join(s.Dir(), agentPath)).NotTo(BeAnExistingFile())
	dir := s.Dir()
	g.Expect(os.WriteFile(filepath.Join(s.Dir(), "stray.yaml"), []byte("x: 1\n"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(s.Dir(), "feature.yaml"), []byte("a: 2\n"), 0o644)).To(Succeed())
	s.Close()

	repo.srv.CommitFile(t, "fleet", "feature", "feature.yaml", "a: 3\n", "Move feature on")
	s, revision = openRevision(t, cache, repo.remote, gitrepo.Ref{Commit: feature})
	g.Expect(revision).To(Equal("sha1:" + feature))
	g.Expect(readFile(g, s.Dir(), "feature.yaml")).To(Equal("a: 1\n"))
	g.Expect(filepath.Join(s.Dir(), "stray.yaml")).NotTo(BeAnExistingFile())
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: 1}))
	s.Close()

	// Another commit moves the same kept clone.
	s, revision = openRevision(t, cache, repo.remote, gitrepo.Ref{Commit: repo.first})
	g.Expect(s.Dir()).To(Equal(dir))
	g.Expect(revision).To(Equal("sha1:" + repo.first))
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
}

func TestOpenRevisionBranchAndCommit(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	cache := newCache(t)
	ref := gitrepo.Ref{Branch: "main", Commit: repo.first}

	s, revision := openRevision(t, cache, repo.remote, ref)
	g.Expect(revision).To(Equal("main@sha1:" + repo.first))
	g.Expect(s.Head()).To(Equal(repo.first))
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
	s.Close()

	repo.srv.CommitFile(t, "fleet", "main", agentPath, "image: ghcr.io/acme/agent:1.4.3\n", "Bump agent again")
	s, revision = openRevision(t, cache, repo.remote, ref)
	g.Expect(revision).To(Equal("main@sha1:" + repo.first))
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: 1}))
}

func TestOpenRevisionRefPrecedence(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	repo.git(t, "tag", "v1", repo.first)
	cache := newCache(t)

	_, revision := openRevision(t, cache, repo.remote, gitrepo.Ref{Branch: "main", Tag: "v1"})
	g.Expect(revision).To(Equal("v1@sha1:"+repo.first), "tag over branch")
	_, revision = openRevision(t, cache, repo.remote, gitrepo.Ref{Tag: "v1", Commit: repo.second})
	g.Expect(revision).To(Equal("sha1:"+repo.second), "commit over tag")
}

func TestOpenRevisionNotFound(t *testing.T) {
	const absent = "0123456789abcdef0123456789abcdef01234567"
	for name, tc := range map[string]struct {
		// prepare changes the repository and returns the ref to open.
		prepare func(t *testing.T, repo revisionRepo) gitrepo.Ref
		// opened is a ref opened before prepare, which keeps a clone.
		opened *gitrepo.Ref
	}{
		"missing tag": {prepare: func(*testing.T, revisionRepo) gitrepo.Ref { return gitrepo.Ref{Tag: "v9.9.9"} }},
		"missing commit": {prepare: func(*testing.T, revisionRepo) gitrepo.Ref {
			return gitrepo.Ref{Commit: absent}
		}},
		"missing branch": {prepare: func(*testing.T, revisionRepo) gitrepo.Ref { return gitrepo.Ref{Branch: "nope"} }},
		"missing branch with a commit": {prepare: func(_ *testing.T, repo revisionRepo) gitrepo.Ref {
			return gitrepo.Ref{Branch: "nope", Commit: repo.first}
		}},
		"commit not on the branch": {prepare: func(t *testing.T, repo revisionRepo) gitrepo.Ref {
			repo.srv.CommitFile(t, "fleet", "feature", "feature.yaml", "a: 1\n", "Start feature")
			return gitrepo.Ref{Branch: "feature", Commit: repo.first}
		}},
		"tag deleted after it was fetched": {
			opened: &gitrepo.Ref{Tag: "v1"},
			prepare: func(t *testing.T, repo revisionRepo) gitrepo.Ref {
				repo.git(t, "tag", "-d", "v1")
				return gitrepo.Ref{Tag: "v1"}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			repo := newRevisionRepo(t)
			repo.git(t, "tag", "v1", repo.first)
			cache := newCache(t)
			if tc.opened != nil {
				s, _ := openRevision(t, cache, repo.remote, *tc.opened)
				s.Close()
			}
			ref := tc.prepare(t, repo)

			s, revision, err := cache.OpenRevision(context.Background(), repo.remote, ref, "")
			g.Expect(err).To(MatchError(gitrepo.ErrRefNotFound))
			g.Expect(s).To(BeNil())
			g.Expect(revision).To(BeEmpty())
		})
	}
}

func TestOpenRevisionMissingCommitKeepsTheClone(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	cache := newCache(t)
	ref := gitrepo.Ref{Commit: "0123456789abcdef0123456789abcdef01234567"}

	for range 2 {
		_, _, err := cache.OpenRevision(context.Background(), repo.remote, ref, "")
		g.Expect(err).To(MatchError(gitrepo.ErrRefNotFound))
	}
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: 1}), "the second use fetches into the first's clone")
}

func TestOpenRevisionInvalidRef(t *testing.T) {
	for name, ref := range map[string]gitrepo.Ref{
		"empty":                    {},
		"short commit":             {Commit: "abc1234"},
		"commit not hex":           {Commit: "zz23456789abcdef0123456789abcdef01234567"},
		"bad tag":                  {Tag: "v1..0"},
		"bad branch with a commit": {Branch: "a b", Commit: "0123456789abcdef0123456789abcdef01234567"},
		"bad branch":               {Branch: "main:other"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			srv := gitserver.Start(t)
			remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)

			_, _, err := newCache(t).OpenRevision(context.Background(), remote, ref, "")
			g.Expect(err).To(MatchError(gitrepo.ErrInvalidRef))
			g.Expect(srv.Counts()).To(Equal(gitserver.Counts{}), "nothing fetched")
		})
	}
}

func TestOpenRevisionClonesAreKeptApart(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	repo.git(t, "tag", "main", repo.first) // a tag named like the branch
	cache := newCache(t)

	// Each session is held to the end of the test: two sharing a kept
	// clone would wait for each other.
	dirs := map[string]string{}
	for _, ref := range []gitrepo.Ref{
		{Branch: "main"},
		{Tag: "main"},
		{Commit: repo.first},
		{Branch: "main", Commit: repo.first},
	} {
		s, revision := openRevision(t, cache, repo.remote, ref)
		g.Expect(dirs).NotTo(HaveKey(s.Dir()), "%+v shares the clone of %s", ref, dirs[s.Dir()])
		dirs[s.Dir()] = revision
	}
	g.Expect(dirs).To(HaveLen(4))
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 4}))
}

func TestOpenRevisionIsReadOnly(t *testing.T) {
	for name, ref := range map[string]func(repo revisionRepo) gitrepo.Ref{
		"branch":            func(revisionRepo) gitrepo.Ref { return gitrepo.Ref{Branch: "main"} },
		"tag":               func(revisionRepo) gitrepo.Ref { return gitrepo.Ref{Tag: "v1"} },
		"commit":            func(repo revisionRepo) gitrepo.Ref { return gitrepo.Ref{Commit: repo.first} },
		"branch and commit": func(repo revisionRepo) gitrepo.Ref { return gitrepo.Ref{Branch: "main", Commit: repo.first} },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			repo := newRevisionRepo(t)
			repo.git(t, "tag", "v1", repo.first)
			s, _ := openRevision(t, newCache(t), repo.remote, ref(repo))

			_, err := s.WriteBack(context.Background(), author, writeFiles(map[string]string{agentPath: "image: ghcr.io/acme/agent:9.9.9\n"}))
			g.Expect(err).To(HaveOccurred())
			g.Expect(repo.srv.Counts().ReceivePack).To(BeZero())
			g.Expect(repo.srv.Log(t, "fleet", "main")[0].SHA).To(Equal(repo.second))
		})
	}
}

func TestOpenRevisionAuthentication(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t, gitserver.WithBasicAuth("alice", "s3cret"))
	repo.git(t, "tag", "v1", repo.first)
	cache := newCache(t)

	for _, ref := range []gitrepo.Ref{{Tag: "v1"}, {Commit: repo.first}, {Branch: "main", Commit: repo.first}} {
		_, _, err := cache.OpenRevision(context.Background(), repo.remote, ref, "")
		g.Expect(err).To(MatchError(gitrepo.ErrAuthentication), "%+v without credentials", ref)
	}

	authed := repo.withRemote(t, map[string][]byte{"username": []byte("alice"), "password": []byte("s3cret")})
	_, revision := openRevision(t, cache, authed.remote, gitrepo.Ref{Tag: "v1"})
	g.Expect(revision).To(Equal("v1@sha1:" + repo.first))
	_, revision = openRevision(t, cache, authed.remote, gitrepo.Ref{Commit: repo.first})
	g.Expect(revision).To(Equal("sha1:" + repo.first))
}

func TestDamagedRevisionCloneIsReplaced(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	repo.git(t, "tag", "v1", repo.first)
	cache := newCache(t)
	s, _ := openRevision(t, cache, repo.remote, gitrepo.Ref{Tag: "v1"})
	dir := s.Dir()
	s.Close()

	objects := filepath.Join(storeDir(g, dir), "objects")
	g.Expect(os.RemoveAll(objects)).To(Succeed())
	g.Expect(os.Mkdir(objects, 0o755)).To(Succeed())

	s, revision := openRevision(t, cache, repo.remote, gitrepo.Ref{Tag: "v1"})
	g.Expect(revision).To(Equal("v1@sha1:" + repo.first))
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 2}))
}

func TestOpenRevisionWaitsForContext(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	repo.git(t, "tag", "v1", repo.first)
	cache := newCache(t)
	openRevision(t, cache, repo.remote, gitrepo.Ref{Tag: "v1"}) // held until the end of the test

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := cache.OpenRevision(ctx, repo.remote, gitrepo.Ref{Tag: "v1"}, "")
	g.Expect(err).To(MatchError(context.Canceled))
}
