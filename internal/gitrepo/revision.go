package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrInvalidRef means a Ref cannot name a revision: it is empty, its commit
// is not a full SHA-1, its branch or tag is not a valid Git reference name,
// or its tag points to something other than a commit.
var ErrInvalidRef = errors.New("invalid Git reference")

// maxTagDepth bounds the chain of annotated tags pointing at tags that
// peeling follows.
const maxTagDepth = 10

// Ref names one revision of a repository. When several fields are set,
// Commit wins over Tag, and Tag over Branch; Branch still qualifies a
// Commit, which must then be in the branch's history.
type Ref struct {
	// Branch is the branch whose tip is checked out.
	Branch string
	// Tag is the tag whose commit is checked out; annotated tags are peeled.
	Tag string
	// Commit is the full SHA-1 of the commit checked out.
	Commit string
}

// OpenRevision locks a kept clone of remote, brings it up to date and checks
// out the revision ref names, and returns the session with the revision as
// `<branch or tag>@sha1:<commit>`, or `sha1:<commit>` for a commit alone.
// The session is read-only: WriteBack fails on it.
//
// A branch alone uses the branch's kept clone, as Open does. A tag, a commit
// and a branch with a commit each have a kept clone of their own, which
// later uses fetch into incrementally: a tag's clone fetches the tag alone
// and follows it when it moves; a commit's clone fetches every branch; a
// branch with a commit fetches the branch and checks that the commit is in
// its history. A tag or commit that the remote does not have fails with an
// error wrapping ErrRefNotFound; a ref that cannot name a revision fails
// with ErrInvalidRef.
func (c *Cache) OpenRevision(ctx context.Context, remote *Remote, ref Ref) (*Session, string, error) {
	if err := ref.validate(); err != nil {
		return nil, "", fmt.Errorf("opening Git repository %s: %w", remote.URL, err)
	}
	if ref.Commit == "" && ref.Tag == "" {
		s, err := c.Open(ctx, remote, OpenOptions{Branch: ref.Branch})
		if err != nil {
			return nil, "", err
		}
		s.wroteBack = true // read-only
		return s, ref.Branch + "@sha1:" + s.Head(), nil
	}

	target := ref.target()
	kc := c.keptClone(remote.URL, target.key)
	select {
	case kc.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, "", fmt.Errorf("waiting for the kept clone of %s: %w", remote.URL, ctx.Err())
	}
	s := &Session{dir: kc.dir, remote: remote, cache: c, clone: kc, tree: kc.tree, wroteBack: true}
	commit, err := s.syncRevision(ctx, target)
	if err != nil {
		s.Close()
		return nil, "", fmt.Errorf("fetching %s of %s: %w", target.what, remote.URL, err)
	}
	s.revision = commit
	revision := "sha1:" + commit.String()
	if target.name != "" {
		revision = target.name + "@" + revision
	}
	return s, revision, nil
}

// validate checks that the ref names a revision, and that the fields used
// to find it are in a form Git accepts.
func (r Ref) validate() error {
	switch {
	case r.Commit != "":
		if !plumbing.IsHash(r.Commit) {
			return fmt.Errorf("%w: commit %q is not a full SHA-1", ErrInvalidRef, r.Commit)
		}
	case r.Tag != "":
		if plumbing.NewTagReferenceName(r.Tag).Validate() != nil {
			return fmt.Errorf("%w: tag %q is not a valid tag name", ErrInvalidRef, r.Tag)
		}
		return nil
	case r.Branch == "":
		return fmt.Errorf("%w: no branch, tag or commit given", ErrInvalidRef)
	}
	if r.Branch != "" && plumbing.NewBranchReferenceName(r.Branch).Validate() != nil {
		return fmt.Errorf("%w: branch %q is not a valid branch name", ErrInvalidRef, r.Branch)
	}
	return nil
}

// revisionTarget is what the kept clone of a tag or commit fetches and how
// it finds the commit to check out.
type revisionTarget struct {
	// key tells the kept clone apart from the others of the URL. It starts
	// with a NUL, which no branch name holds, so that it never names the
	// clone of a branch.
	key string
	// name is the ref written before the commit in the revision, if any.
	name string
	// what describes the ref in errors.
	what string
	// specs are the refspecs fetched.
	specs []config.RefSpec
	// resolve returns the commit to check out from the fetched clone.
	resolve func(repo *git.Repository) (plumbing.Hash, error)
}

// target returns the revisionTarget of a ref with a tag or a commit.
func (r Ref) target() revisionTarget {
	switch {
	case r.Commit != "" && r.Branch != "":
		commit := plumbing.NewHash(r.Commit)
		return revisionTarget{
			key:   "\x00commit\x00" + commit.String() + "\x00branch\x00" + r.Branch,
			name:  r.Branch,
			what:  fmt.Sprintf("commit %s of branch %q", commit, r.Branch),
			specs: []config.RefSpec{trackingSpec(r.Branch)},
			resolve: func(repo *git.Repository) (plumbing.Hash, error) {
				return resolveCommitOnBranch(repo, commit, r.Branch)
			},
		}
	case r.Commit != "":
		commit := plumbing.NewHash(r.Commit)
		return revisionTarget{
			key:   "\x00commit\x00" + commit.String(),
			what:  "commit " + commit.String(),
			specs: []config.RefSpec{config.RefSpec(fmt.Sprintf("+refs/heads/*:%s", trackingRef("*")))},
			resolve: func(repo *git.Repository) (plumbing.Hash, error) {
				return resolveCommit(repo, commit)
			},
		}
	default:
		tag := plumbing.NewTagReferenceName(r.Tag)
		return revisionTarget{
			key:   "\x00tag\x00" + r.Tag,
			name:  r.Tag,
			what:  fmt.Sprintf("tag %q", r.Tag),
			specs: []config.RefSpec{config.RefSpec(fmt.Sprintf("+%s:%s", tag, tag))},
			resolve: func(repo *git.Repository) (plumbing.Hash, error) {
				return resolveTag(repo, tag)
			},
		}
	}
}

// syncRevision brings the kept clone of a tag or commit up to date and
// checks out the commit the target resolves to. Like sync, it fetches into
// a clone that is there and sound, and clones afresh otherwise.
func (s *Session) syncRevision(ctx context.Context, t revisionTarget) (plumbing.Hash, error) {
	repo, err := s.openRevisionClone()
	if err == nil {
		err = s.fetchRevision(ctx, repo, t.specs)
		if err == nil {
			s.cache.fetchCount.Add(1)
			s.repo = repo
			var commit plumbing.Hash
			if commit, err = t.resolve(repo); err == nil {
				if err = s.resetTo(commit); err == nil {
					return commit, nil
				}
			}
		}
		if isRemoteError(err) || errors.Is(err, ErrInvalidRef) || ctx.Err() != nil {
			return plumbing.ZeroHash, err
		}
	}
	return s.recloneRevision(ctx, t)
}

// recloneRevision fetches the target into a new repository next to the kept
// clone and replaces it only when the fetch succeeded, so that a network
// failure leaves it as it was.
func (s *Session) recloneRevision(ctx context.Context, t revisionTarget) (plumbing.Hash, error) {
	s.tree.invalidate()
	tmp, err := os.MkdirTemp(filepath.Dir(s.dir), filepath.Base(s.dir)+".new-")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("creating clone directory: %w", err)
	}
	if err := s.cloneRevision(ctx, tmp, t.specs); err != nil {
		_ = os.RemoveAll(tmp)
		return plumbing.ZeroHash, err
	}
	s.cache.cloneCount.Add(1)
	if err := os.RemoveAll(s.dir); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("removing the old clone: %w", err)
	}
	if err := os.Rename(tmp, s.dir); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("moving the new clone in place: %w", err)
	}
	s.repo, err = s.openRepository()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("opening the new clone: %w", err)
	}
	// A commit missing from what was fetched leaves the clone in place, for
	// the next use to fetch into.
	commit, err := t.resolve(s.repo)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return commit, s.checkoutFresh(commit)
}

// cloneRevision creates a repository in dir with the remote and fetches
// specs into it.
func (s *Session) cloneRevision(ctx context.Context, dir string, specs []config.RefSpec) error {
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		return fmt.Errorf("creating the clone: %w", err)
	}
	_, err = repo.CreateRemote(&config.RemoteConfig{Name: remoteName, URLs: []string{s.remote.URL}, Fetch: specs})
	if err != nil {
		return fmt.Errorf("creating the clone's remote: %w", err)
	}
	if err := s.fetchRevision(ctx, repo, specs); err != nil {
		return fmt.Errorf("cloning: %w", err)
	}
	return nil
}

// fetchRevision fetches specs into repo, force-updating the refs they name
// (a moved tag, a rewritten branch) and removing those the remote no longer
// has.
func (s *Session) fetchRevision(ctx context.Context, repo *git.Repository, specs []config.RefSpec) error {
	err := repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: remoteName,
		RefSpecs:   specs,
		Auth:       s.remote.auth,
		CABundle:   s.remote.caBundle,
		Tags:       git.NoTags,
		Prune:      true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return classify(err)
	}
	return nil
}

// openRevisionClone opens the kept clone of a tag or commit and
// checks that it is sound enough to fetch into: the index, every fetched
// ref's object, and the commit and tree checked out, if any. A clone whose
// first use found no commit to check out has no HEAD yet.
func (s *Session) openRevisionClone() (*git.Repository, error) {
	repo, err := s.openRepository()
	if err != nil {
		return nil, err
	}
	if _, err := repo.Storer.Index(); err != nil {
		return nil, fmt.Errorf("reading the index: %w", err)
	}
	refs, err := repo.Storer.IterReferences()
	if err != nil {
		return nil, fmt.Errorf("listing the fetched refs: %w", err)
	}
	err = refs.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() != plumbing.HashReference || ref.Name() == plumbing.HEAD {
			return nil
		}
		if _, err := repo.Storer.EncodedObject(plumbing.AnyObject, ref.Hash()); err != nil {
			return fmt.Errorf("reading %s: %w", ref.Name(), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	head, err := repo.Storer.Reference(plumbing.HEAD)
	if err != nil || head.Type() != plumbing.HashReference {
		return repo, nil
	}
	commit, err := repo.CommitObject(head.Hash())
	if err != nil {
		return nil, fmt.Errorf("reading the commit checked out: %w", err)
	}
	if _, err := commit.Tree(); err != nil {
		return nil, fmt.Errorf("reading the tree checked out: %w", err)
	}
	return repo, nil
}

// resolveTag returns the commit the fetched tag points to, peeling
// annotated tags.
func resolveTag(repo *git.Repository, tag plumbing.ReferenceName) (plumbing.Hash, error) {
	ref, err := repo.Reference(tag, true)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("reading the fetched tag: %w", err)
	}
	hash := ref.Hash()
	for range maxTagDepth {
		obj, err := repo.Storer.EncodedObject(plumbing.AnyObject, hash)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("reading %s: %w", hash, err)
		}
		if obj.Type() != plumbing.TagObject {
			if obj.Type() != plumbing.CommitObject {
				return plumbing.ZeroHash, fmt.Errorf("%w: %s points to a %s, not a commit", ErrInvalidRef, tag.Short(), obj.Type())
			}
			return hash, nil
		}
		t, err := object.DecodeTag(repo.Storer, obj)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("reading tag object %s: %w", hash, err)
		}
		hash = t.Target
	}
	return plumbing.ZeroHash, fmt.Errorf("%w: %s is a chain of more than %d tags", ErrInvalidRef, tag.Short(), maxTagDepth)
}

// resolveCommit returns commit if the fetched branches brought it in.
func resolveCommit(repo *git.Repository, commit plumbing.Hash) (plumbing.Hash, error) {
	_, err := repo.CommitObject(commit)
	switch {
	case errors.Is(err, plumbing.ErrObjectNotFound):
		return plumbing.ZeroHash, fmt.Errorf("%w: no branch holds commit %s", ErrRefNotFound, commit)
	case err != nil:
		return plumbing.ZeroHash, fmt.Errorf("reading commit %s: %w", commit, err)
	}
	return commit, nil
}

// resolveCommitOnBranch returns commit if it is in the history of the
// fetched branch.
func resolveCommitOnBranch(repo *git.Repository, commit plumbing.Hash, branch string) (plumbing.Hash, error) {
	ref, err := repo.Reference(trackingRef(branch), true)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("reading the fetched branch: %w", err)
	}
	tip, err := repo.CommitObject(ref.Hash())
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("reading the branch tip: %w", err)
	}
	notFound := fmt.Errorf("%w: commit %s is not in the history of branch %q", ErrRefNotFound, commit, branch)
	c, err := repo.CommitObject(commit)
	switch {
	case errors.Is(err, plumbing.ErrObjectNotFound):
		return plumbing.ZeroHash, notFound
	case err != nil:
		return plumbing.ZeroHash, fmt.Errorf("reading commit %s: %w", commit, err)
	}
	ancestor, err := c.IsAncestor(tip)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("walking the branch history: %w", err)
	}
	if !ancestor {
		return plumbing.ZeroHash, notFound
	}
	return commit, nil
}
