package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
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

// OpenRevision locks a kept clone of remote for owner, brings it up to date
// and checks out the revision ref names, and returns the session with the
// revision as `<branch or tag>@sha1:<commit>`, or `sha1:<commit>` for a
// commit alone. The session is read-only: WriteBack fails on it. Owner
// claims the clone as OpenOptions.Owner does; empty claims nothing.
//
// A branch alone uses the branch's kept clone, as Open does. Tags, commits
// and commits of a branch have a kept clone each per repository, which
// every tag (or commit) reuses, moving its working tree by the difference
// between the two: the tag clone fetches the tag alone and follows it when
// it moves; the commit clone fetches every branch; the clone of a branch's
// commits fetches the branch and checks that the commit is in its history.
// Users of different tags (or commits) of one repository take turns.
// A tag or commit that the remote does not have fails with an error
// wrapping ErrRefNotFound; a ref that cannot name a revision fails with
// ErrInvalidRef.
func (c *Cache) OpenRevision(ctx context.Context, remote *Remote, ref Ref, owner string) (*Session, string, error) {
	if err := ref.validate(); err != nil {
		return nil, "", fmt.Errorf("opening Git repository %s: %w", remote.Redacted(), err)
	}
	if ref.Commit == "" && ref.Tag == "" {
		s, err := c.Open(ctx, remote, OpenOptions{Branch: ref.Branch, Owner: owner})
		if err != nil {
			return nil, "", err
		}
		s.wroteBack = true // read-only
		return s, ref.Branch + "@sha1:" + s.Head(), nil
	}

	target := ref.target()
	s, err := c.session(ctx, remote, target.clone, owner)
	if err != nil {
		return nil, "", err
	}
	s.wroteBack = true
	commit, err := s.update(ctx, target)
	if err != nil {
		s.Close()
		return nil, "", fmt.Errorf("fetching %s of %s: %w", target.what, remote.Redacted(), err)
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
	// clone names the kept clone, and the refs it fetches into:
	// refs/remotes/<clone>/.
	clone string
	// name is the ref written before the commit in the revision, if any.
	name string
	// what describes the ref in errors.
	what string
	// specs are the refspecs fetched.
	specs []config.RefSpec
	// only is the one ref specs fetch into, empty when they fetch a
	// pattern. The kept clone drops the refs an earlier tag or branch
	// left, so that they do not pile up.
	only plumbing.ReferenceName
	// find returns the commit to check out from the fetched clone.
	find func(repo *git.Repository) (plumbing.Hash, error)
}

// target returns the revisionTarget of a ref with a tag or a commit.
func (r Ref) target() revisionTarget {
	switch {
	case r.Commit != "" && r.Branch != "":
		commit := plumbing.NewHash(r.Commit)
		fetched := plumbing.NewRemoteReferenceName(branchCommit, r.Branch)
		return revisionTarget{
			clone: branchCommit,
			name:  r.Branch,
			what:  fmt.Sprintf("commit %s of branch %q", commit, r.Branch),
			specs: []config.RefSpec{fetchSpec(plumbing.NewBranchReferenceName(r.Branch), fetched)},
			only:  fetched,
			find: func(repo *git.Repository) (plumbing.Hash, error) {
				return resolveCommitOnBranch(repo, commit, r.Branch, fetched)
			},
		}
	case r.Commit != "":
		commit := plumbing.NewHash(r.Commit)
		return revisionTarget{
			clone: commitCheckout,
			what:  "commit " + commit.String(),
			specs: []config.RefSpec{fetchSpec("refs/heads/*", plumbing.NewRemoteReferenceName(commitCheckout, "*"))},
			find: func(repo *git.Repository) (plumbing.Hash, error) {
				return resolveCommit(repo, commit)
			},
		}
	default:
		fetched := plumbing.NewRemoteReferenceName(tagCheckout, r.Tag)
		return revisionTarget{
			clone: tagCheckout,
			name:  r.Tag,
			what:  fmt.Sprintf("tag %q", r.Tag),
			specs: []config.RefSpec{fetchSpec(plumbing.NewTagReferenceName(r.Tag), fetched)},
			only:  fetched,
			find: func(repo *git.Repository) (plumbing.Hash, error) {
				return resolveTag(repo, fetched, r.Tag)
			},
		}
	}
}

// fetchSpec returns the refspec that force-fetches the remote's ref src
// into dst.
func fetchSpec(src, dst plumbing.ReferenceName) config.RefSpec {
	return config.RefSpec(fmt.Sprintf("+%s:%s", src, dst))
}

func (t revisionTarget) open(s *Session) (*git.Repository, error) {
	return s.openRevisionClone()
}

func (t revisionTarget) fetch(ctx context.Context, s *Session, repo *git.Repository, _ bool) error {
	return s.fetchRevision(ctx, repo, t)
}

func (t revisionTarget) resolve(_ *Session, repo *git.Repository) (plumbing.Hash, error) {
	return t.find(repo)
}

// fetchRevision fetches the target's specs into repo, force-updating the
// refs they name (a moved tag, a rewritten branch) and removing those the
// remote no longer has, and then the refs of the kept clone the target
// does not fetch.
func (s *Session) fetchRevision(ctx context.Context, repo *git.Repository, t revisionTarget) error {
	err := s.remote.withDeadline(ctx, "fetching from", func(ctx context.Context, proxy transport.ProxyOptions) error {
		return s.origin(repo).FetchContext(ctx, &git.FetchOptions{
			RefSpecs:     t.specs,
			Auth:         s.remote.auth,
			CABundle:     s.remote.caBundle,
			ProxyOptions: proxy,
			Tags:         git.NoTags,
			Prune:        true,
		})
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return classify(err)
	}
	if t.only == "" {
		return nil
	}
	refs, err := s.fetchedRefs(repo)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if ref.Name() != t.only {
			if err := removeRef(repo, ref.Name()); err != nil {
				return err
			}
		}
	}
	return nil
}

// fetchedRefs returns the refs the kept clone fetched into its object
// store.
func (s *Session) fetchedRefs(repo *git.Repository) ([]*plumbing.Reference, error) {
	iter, err := repo.Storer.IterReferences()
	if err != nil {
		return nil, fmt.Errorf("listing the fetched refs: %w", err)
	}
	prefix := plumbing.NewRemoteReferenceName(s.clone.name, "").String()
	var refs []*plumbing.Reference
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		if strings.HasPrefix(ref.Name().String(), prefix) {
			refs = append(refs, ref)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the fetched refs: %w", err)
	}
	return refs, nil
}

// openRevisionClone opens the kept clone of a tag or commit and
// checks that it is sound enough to fetch into: it uses the repository's
// newest object store, and the index, every ref it fetched, and the commit
// and tree checked out, if any, are there. A clone whose first use found
// no commit to check out has no HEAD yet.
func (s *Session) openRevisionClone() (*git.Repository, error) {
	repo, err := s.openCurrent()
	if err != nil {
		return nil, err
	}
	if err := s.checkIndex(repo); err != nil {
		return nil, err
	}
	refs, err := s.fetchedRefs(repo)
	if err != nil {
		return nil, err
	}
	for _, ref := range refs {
		if ref.Type() != plumbing.HashReference {
			continue
		}
		if _, err := repo.Storer.EncodedObject(plumbing.AnyObject, ref.Hash()); err != nil {
			return nil, fmt.Errorf("reading %s: %w", ref.Name(), err)
		}
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

// resolveTag returns the commit the tag, fetched into fetched, points to,
// peeling annotated tags.
func resolveTag(repo *git.Repository, fetched plumbing.ReferenceName, tag string) (plumbing.Hash, error) {
	ref, err := repo.Reference(fetched, true)
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
				return plumbing.ZeroHash, fmt.Errorf("%w: %s points to a %s, not a commit", ErrInvalidRef, tag, obj.Type())
			}
			return hash, nil
		}
		t, err := object.DecodeTag(repo.Storer, obj)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("reading tag object %s: %w", hash, err)
		}
		hash = t.Target
	}
	return plumbing.ZeroHash, fmt.Errorf("%w: %s is a chain of more than %d tags", ErrInvalidRef, tag, maxTagDepth)
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

// resolveCommitOnBranch returns commit if it is in the history of branch,
// fetched into fetched.
func resolveCommitOnBranch(repo *git.Repository, commit plumbing.Hash, branch string, fetched plumbing.ReferenceName) (plumbing.Hash, error) {
	ref, err := repo.Reference(fetched, true)
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
