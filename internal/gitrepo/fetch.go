package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// fetchTarget is what a kept clone fetches and checks out: the tip of a
// branch (branchTarget) or a tag or commit (revisionTarget).
type fetchTarget interface {
	// open opens the kept clone and checks that it is sound enough to
	// fetch into.
	open(s *Session) (*git.Repository, error)
	// fetch fetches into repo, a kept clone or a new one (fresh).
	fetch(ctx context.Context, s *Session, repo *git.Repository, fresh bool) error
	// resolve returns the commit to check out from what repo fetched.
	resolve(s *Session, repo *git.Repository) (plumbing.Hash, error)
}

// update brings the session's kept clone up to date with t and checks out
// the commit t resolves to, which it returns. It fetches into a clone that
// is there and sound, and otherwise clones afresh next to it, in an object
// store chosen by why the kept clone could not be used (see replaceClone),
// replacing the kept clone only when the clone succeeded, so that a
// network failure leaves it as it was. A remote that fails, an invalid ref
// or a done ctx fails it without a new clone.
func (s *Session) update(ctx context.Context, t fetchTarget) (plumbing.Hash, error) {
	repo, err := t.open(s)
	if err == nil {
		err = t.fetch(ctx, s, repo, false)
		if err == nil {
			s.cache.fetchCount.Add(1)
			s.repo = repo
			var commit plumbing.Hash
			if commit, err = t.resolve(s, repo); err == nil {
				if err = s.resetTo(commit); err == nil {
					return commit, nil
				}
			}
		}
		if isRemoteError(err) || errors.Is(err, ErrInvalidRef) || ctx.Err() != nil {
			return plumbing.ZeroHash, err
		}
	}
	err = s.replaceClone(ctx, err, func(repo *git.Repository) error {
		if err := t.fetch(ctx, s, repo, true); err != nil {
			return fmt.Errorf("cloning: %w", err)
		}
		return nil
	})
	if err != nil {
		return plumbing.ZeroHash, err
	}
	// A commit missing from what was fetched leaves the new clone in
	// place, for the next use to fetch into.
	commit, err := t.resolve(s, s.repo)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return commit, s.checkoutFresh(commit)
}

// branchTarget is the tip of the session's branch, with its push branch.
type branchTarget struct{}

// sync brings the kept clone up to date and checks out the branch tip: it
// clones afresh when there is none, when it is damaged, or when the remote
// rewrote the branch.
func (s *Session) sync(ctx context.Context) error {
	_, err := s.update(ctx, branchTarget{})
	return err
}

func (branchTarget) open(s *Session) (*git.Repository, error) {
	return s.openClone()
}

func (branchTarget) fetch(ctx context.Context, s *Session, repo *git.Repository, fresh bool) error {
	if !fresh {
		return s.fetch(ctx, repo)
	}
	if err := s.fetchSpecs(ctx, repo, []config.RefSpec{s.trackingSpec(s.branch)}); err != nil {
		return err
	}
	return s.fetchPushBranch(ctx, repo)
}

func (branchTarget) resolve(s *Session, repo *git.Repository) (plumbing.Hash, error) {
	ref, err := repo.Reference(s.trackingRef(s.branch), true)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("reading the fetched branch: %w", err)
	}
	return ref.Hash(), nil
}

// replaceClone makes a new checkout next to the kept clone, lets fetch
// fill it, and moves it in place of the kept clone, opened as s.repo. A
// clone that is missing or uses an old store is made in the repository's
// newest store, so that it fetches only what the other clones did not;
// one that is damaged or whose branch was rewritten (why) is made in a new
// store, as is one whose making failed in the newest store for another
// reason than the remote.
func (s *Session) replaceClone(ctx context.Context, why error, fetch func(*git.Repository) error) error {
	fresh := !errors.Is(why, git.ErrRepositoryNotExists) && !errors.Is(why, errStaleClone)
	err := s.cloneInto(ctx, fresh, fetch)
	if err != nil && !fresh && !isRemoteError(err) && !errors.Is(err, ErrInvalidRef) && ctx.Err() == nil {
		err = s.cloneInto(ctx, true, fetch)
	}
	return err
}

// cloneInto is replaceClone in the newest object store, or a new one.
func (s *Session) cloneInto(ctx context.Context, fresh bool, fetch func(*git.Repository) error) error {
	s.tree.invalidate()
	s.closeWorktree()
	store, made, err := s.cache.pinStore(s.clone.repository, fresh)
	if err != nil {
		return err
	}
	s.pinned = append(s.pinned, store)
	tmp, err := os.MkdirTemp(filepath.Dir(s.dir), filepath.Base(s.dir)+tempSuffix)
	if err != nil {
		err = fmt.Errorf("creating clone directory: %w", err)
	} else {
		err = initCheckout(tmp, store)
	}
	var repo *git.Repository
	if err == nil {
		repo, err = s.openAt(tmp, store)
	}
	if err == nil {
		err = fetch(repo)
	}
	if err != nil {
		if tmp != "" {
			_ = os.RemoveAll(tmp)
		}
		if made {
			s.cache.discardStore(s.clone.repository, store)
		}
		return err
	}
	s.cache.cloneCount.Add(1)
	if err := s.cache.remove(s.dir); err != nil {
		return fmt.Errorf("removing the old clone: %w", err)
	}
	if err := os.Rename(tmp, s.dir); err != nil {
		return fmt.Errorf("moving the new clone in place: %w", err)
	}
	s.cache.mu.Lock()
	s.clone.store = store
	s.cache.mu.Unlock()
	s.store = store
	s.repo, err = s.openRepository()
	if err != nil {
		return fmt.Errorf("opening the new clone: %w", err)
	}
	return nil
}

// openRepository opens the repository of the kept clone.
func (s *Session) openRepository() (*git.Repository, error) {
	return s.openAt(s.dir, s.store)
}

// openAt opens the checkout dir of the object store st. Its pack files
// stay open until Close, where git.PlainOpen would open a pack file again
// for each object read: a commit, a push or a checkout reads thousands.
func (s *Session) openAt(dir string, st *objectStore) (*git.Repository, error) {
	wt := osfs.New(dir)
	if _, err := wt.Stat(git.GitDirName); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, git.ErrRepositoryNotExists
		}
		return nil, err
	}
	dot, err := wt.Chroot(git.GitDirName)
	if err != nil {
		return nil, err
	}
	gitDir := dotgit.NewRepositoryFilesystem(dot, osfs.New(st.dir))
	storage := filesystem.NewStorageWithOptions(gitDir, cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
	s.storages = append(s.storages, storage)
	return git.Open(storage, wt)
}

// openClone opens the kept clone and checks that it is sound enough to
// fetch into: it uses the repository's newest object store, and HEAD, the
// index and the fetched branch tip with its tree are there.
func (s *Session) openClone() (*git.Repository, error) {
	repo, err := s.openCurrent()
	if err != nil {
		return nil, err
	}
	if _, err := repo.Head(); err != nil {
		return nil, fmt.Errorf("reading HEAD: %w", err)
	}
	if err := s.checkIndex(repo); err != nil {
		return nil, err
	}
	ref, err := repo.Reference(s.trackingRef(s.branch), true)
	if err != nil {
		return nil, fmt.Errorf("reading the fetched branch: %w", err)
	}
	commit, err := repo.CommitObject(ref.Hash())
	if err != nil {
		return nil, fmt.Errorf("reading the branch tip: %w", err)
	}
	if _, err := commit.Tree(); err != nil {
		return nil, fmt.Errorf("reading the branch tip's tree: %w", err)
	}
	return repo, nil
}

// checkIndex checks that the index of repo, the kept clone, can be read,
// unless it is the index the session's state knows, unchanged since it was
// written: the index of a clone of 100,000 files is megabytes to decode.
func (s *Session) checkIndex(repo *git.Repository) error {
	if !s.tree.indexCommit(s.dir).IsZero() {
		return nil
	}
	if _, err := repo.Storer.Index(); err != nil {
		return fmt.Errorf("reading the index: %w", err)
	}
	return nil
}

// openCurrent opens the kept clone, failing with errStaleClone when it
// does not use the repository's newest object store.
func (s *Session) openCurrent() (*git.Repository, error) {
	s.cache.mu.Lock()
	current := s.clone.repository.current()
	s.cache.mu.Unlock()
	if s.store == nil || s.store != current {
		return nil, errStaleClone
	}
	return s.openRepository()
}

// fetch fetches the branch (and the push branch) into repo and fails with
// errHistoryRewritten when the branch's new tip does not descend from the
// one fetched before.
func (s *Session) fetch(ctx context.Context, repo *git.Repository) error {
	before, err := repo.Reference(s.trackingRef(s.branch), true)
	if err != nil {
		return fmt.Errorf("reading the fetched branch: %w", err)
	}
	specs := []config.RefSpec{s.trackingSpec(s.branch)}
	if s.pushBranch != s.branch {
		specs = append(specs, s.trackingSpec(s.pushBranch))
	}
	err = s.fetchSpecs(ctx, repo, specs)
	if errors.Is(err, ErrRefNotFound) && len(specs) > 1 {
		// The push branch may not exist yet: fetch the branch alone.
		err = s.fetchSpecs(ctx, repo, specs[:1])
		if err == nil {
			err = removeRef(repo, s.trackingRef(s.pushBranch))
		}
	}
	if err != nil {
		return err
	}
	after, err := repo.Reference(s.trackingRef(s.branch), true)
	if err != nil {
		return fmt.Errorf("reading the fetched branch: %w", err)
	}
	if err := s.readPushTip(repo); err != nil {
		return err
	}
	if before.Hash() == after.Hash() {
		return nil
	}
	old, err := repo.CommitObject(before.Hash())
	if err != nil {
		return fmt.Errorf("reading the previous branch tip: %w", err)
	}
	tip, err := repo.CommitObject(after.Hash())
	if err != nil {
		return fmt.Errorf("reading the new branch tip: %w", err)
	}
	ancestor, err := old.IsAncestor(tip)
	if err != nil {
		return fmt.Errorf("walking the branch history: %w", err)
	}
	if !ancestor {
		return errHistoryRewritten
	}
	return nil
}

// fetchPushBranch fetches the push branch into a fresh clone, if it differs
// from the branch and exists on the remote.
func (s *Session) fetchPushBranch(ctx context.Context, repo *git.Repository) error {
	if s.pushBranch != s.branch {
		err := s.fetchSpecs(ctx, repo, []config.RefSpec{s.trackingSpec(s.pushBranch)})
		if err != nil && !errors.Is(err, ErrRefNotFound) {
			return err
		}
	}
	return s.readPushTip(repo)
}

func (s *Session) fetchSpecs(ctx context.Context, repo *git.Repository, specs []config.RefSpec) error {
	err := s.remote.withDeadline(ctx, "fetching from", func(ctx context.Context, proxy transport.ProxyOptions) error {
		return s.origin(repo).FetchContext(ctx, &git.FetchOptions{
			RefSpecs:     specs,
			Auth:         s.remote.auth,
			CABundle:     s.remote.caBundle,
			ProxyOptions: proxy,
			Tags:         git.NoTags,
		})
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return classify(err)
	}
	return nil
}

// readPushTip records the fetched tip of the push branch, if it exists.
func (s *Session) readPushTip(repo *git.Repository) error {
	s.pushTip = plumbing.ZeroHash
	if s.pushBranch == s.branch {
		return nil
	}
	ref, err := repo.Reference(s.trackingRef(s.pushBranch), true)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("reading the fetched push branch: %w", err)
	}
	s.pushTip = ref.Hash()
	return nil
}

// origin returns the remote of the session's repository, which is in no
// configuration: the object store's configuration is shared by the
// checkouts, and the remote's fetched refs are in refspecs.
func (s *Session) origin(repo *git.Repository) *git.Remote {
	return git.NewRemote(repo.Storer, &config.RemoteConfig{Name: s.clone.name, URLs: []string{s.remote.URL}})
}

// trackingRef returns the ref branch is fetched into: one of the refs of
// the kept clone in its object store.
func (s *Session) trackingRef(branch string) plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName(s.clone.name, branch)
}

func (s *Session) trackingSpec(branch string) config.RefSpec {
	return fetchSpec(plumbing.NewBranchReferenceName(branch), s.trackingRef(branch))
}

func removeRef(repo *git.Repository, name plumbing.ReferenceName) error {
	if err := repo.Storer.RemoveReference(name); err != nil && !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return fmt.Errorf("removing %s: %w", name, err)
	}
	return nil
}
