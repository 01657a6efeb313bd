package gitrepo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// remoteName is the name of the remote in every kept clone.
const remoteName = "origin"

// errHistoryRewritten means the remote branch no longer contains the commit
// the kept clone had fetched before.
var errHistoryRewritten = errors.New("remote branch history was rewritten")

// Cache keeps one clone per repository (RepoKey of its URL) and branch
// under a directory, shared by every user of that repository and branch. A
// use locks its clone, fetches what is new, and works in its working tree;
// a clone that is damaged, or whose remote branch was rewritten, is
// replaced by a fresh one.
//
// The locks are in-process: one Cache per directory and process.
type Cache struct {
	root string

	mu     sync.Mutex
	clones map[string]*keptClone

	cloneCount atomic.Int64
	fetchCount atomic.Int64
}

// keptClone is one clone of the cache and the lock of its users.
type keptClone struct {
	dir  string
	lock chan struct{}
	// tree is what the last user knew of the clone's index. Only the
	// holder of lock reads or writes it. It is kept in memory, so a clone
	// found on disk after a restart is first checked in full.
	tree worktreeState
}

// CacheStats counts the network operations of a Cache.
type CacheStats struct {
	// Clones counts full clones, first ones and replacements.
	Clones int64
	// Fetches counts incremental fetches into kept clones, one per use of
	// a clone that was already there.
	Fetches int64
}

// NewCache returns a Cache that keeps its clones under root, creating it.
func NewCache(root string) (*Cache, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("creating clone cache directory: %w", err)
	}
	return &Cache{root: root, clones: map[string]*keptClone{}}, nil
}

// Stats returns how many clones and fetches the cache has made.
func (c *Cache) Stats() CacheStats {
	return CacheStats{Clones: c.cloneCount.Load(), Fetches: c.fetchCount.Load()}
}

// OpenOptions says which branches a Session reads and writes.
type OpenOptions struct {
	// Branch is the branch checked out. Clones are kept per URL and Branch.
	Branch string
	// PushBranch is the branch WriteBack pushes to; empty means Branch.
	PushBranch string
}

// Session is the exclusive use of a kept clone, brought up to date with the
// remote and checked out at the tip of its branch. Close releases it.
type Session struct {
	dir        string
	remote     *Remote
	branch     string
	pushBranch string
	cache      *Cache
	clone      *keptClone
	repo       *git.Repository
	// pushTip is the remote's push branch tip, zero when it does not exist.
	pushTip plumbing.Hash
	// tree is what the session knows of the index and working tree.
	tree worktreeState
	// revision is the commit OpenRevision checked out, zero for a session
	// at the tip of its branch.
	revision  plumbing.Hash
	wroteBack bool
	// storages are the repositories the session opened, closed by Close.
	storages []*filesystem.Storage
}

// Open locks the kept clone of remote and opts.Branch, waiting for other
// users of it (or for ctx), then clones or fetches it and checks out the tip
// of the branch in its working tree.
func (c *Cache) Open(ctx context.Context, remote *Remote, opts OpenOptions) (*Session, error) {
	if opts.Branch == "" {
		return nil, errors.New("opening Git repository: no branch given")
	}
	if opts.PushBranch == "" {
		opts.PushBranch = opts.Branch
	}
	kc := c.keptClone(remote.URL, opts.Branch)
	select {
	case kc.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the kept clone of %s: %w", remote.URL, ctx.Err())
	}
	s := &Session{dir: kc.dir, remote: remote, branch: opts.Branch, pushBranch: opts.PushBranch, cache: c, clone: kc, tree: kc.tree}
	if err := s.sync(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("fetching branch %q of %s: %w", opts.Branch, remote.URL, err)
	}
	return s, nil
}

func (c *Cache) keptClone(url, branch string) *keptClone {
	sum := sha256.Sum256([]byte(RepoKey(url) + "\x00" + branch))
	key := hex.EncodeToString(sum[:12])
	c.mu.Lock()
	defer c.mu.Unlock()
	kc, ok := c.clones[key]
	if !ok {
		kc = &keptClone{dir: filepath.Join(c.root, key), lock: make(chan struct{}, 1)}
		c.clones[key] = kc
	}
	return kc
}

// Close releases the kept clone for its next user. It is safe to call more
// than once.
func (s *Session) Close() {
	for _, storage := range s.storages {
		_ = storage.Close() // read-only files; nothing is lost
	}
	s.storages = nil
	if s.clone != nil {
		s.clone.tree = s.tree.handedOver()
		<-s.clone.lock
		s.clone = nil
	}
}

// Dir returns the working tree of the session.
func (s *Session) Dir() string {
	return s.dir
}

// Head returns the SHA of the commit checked out: the fetched tip of the
// session's branch, or the revision OpenRevision resolved.
func (s *Session) Head() string {
	if !s.revision.IsZero() {
		return s.revision.String()
	}
	return s.branchTip().String()
}

// sync brings the kept clone up to date and checks out the branch tip. It
// fetches into a clone that is there and sound, and clones afresh when there
// is none, when it is damaged, or when the remote rewrote the branch.
func (s *Session) sync(ctx context.Context) error {
	repo, err := s.openClone()
	if err == nil {
		err = s.fetch(ctx, repo)
		if err == nil {
			s.cache.fetchCount.Add(1)
			s.repo = repo
			if err = s.checkout(); err == nil {
				return nil
			}
		}
		if isRemoteError(err) || ctx.Err() != nil {
			return err
		}
	}
	return s.reclone(ctx)
}

// reclone clones the remote next to the kept clone and replaces it only
// when the clone succeeded, so a network failure leaves it as it was.
func (s *Session) reclone(ctx context.Context) error {
	s.tree.invalidate()
	tmp, err := os.MkdirTemp(filepath.Dir(s.dir), filepath.Base(s.dir)+".new-")
	if err != nil {
		return fmt.Errorf("creating clone directory: %w", err)
	}
	_, err = git.PlainCloneContext(ctx, tmp, false, &git.CloneOptions{
		URL:           s.remote.URL,
		Auth:          s.remote.auth,
		CABundle:      s.remote.caBundle,
		RemoteName:    remoteName,
		ReferenceName: plumbing.NewBranchReferenceName(s.branch),
		SingleBranch:  true,
		NoCheckout:    true,
		Tags:          git.NoTags,
	})
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("cloning: %w", classify(err))
	}
	s.cache.cloneCount.Add(1)
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("removing the old clone: %w", err)
	}
	if err := os.Rename(tmp, s.dir); err != nil {
		return fmt.Errorf("moving the new clone in place: %w", err)
	}
	s.repo, err = s.openRepository()
	if err != nil {
		return fmt.Errorf("opening the new clone: %w", err)
	}
	if err := s.fetchPushBranch(ctx, s.repo); err != nil {
		return err
	}
	return s.checkoutFresh(s.branchTip())
}

// checkoutFresh writes the files of commit into the empty working tree of a
// new clone and an index for them, and detaches HEAD there. It does what a
// hard reset does on an empty working tree, several times faster.
func (s *Session) checkoutFresh(commit plumbing.Hash) error {
	c, err := s.repo.CommitObject(commit)
	if err != nil {
		return fmt.Errorf("reading the branch tip: %w", err)
	}
	tree, err := c.Tree()
	if err != nil {
		return fmt.Errorf("reading the branch tip's tree: %w", err)
	}
	idx := &index.Index{Version: 2}
	err = tree.Files().ForEach(func(f *object.File) error {
		if err := s.writeEntry(f.Name, object.TreeEntry{Name: f.Name, Mode: f.Mode, Hash: f.Hash}); err != nil {
			return err
		}
		info, err := os.Lstat(filepath.Join(s.dir, filepath.FromSlash(f.Name)))
		if err != nil {
			return fmt.Errorf("checking out %s: %w", f.Name, err)
		}
		idx.Entries = append(idx.Entries, &index.Entry{
			Name: f.Name, Hash: f.Hash, Mode: f.Mode, ModifiedAt: info.ModTime(), Size: uint32(info.Size()),
		})
		return nil
	})
	if err != nil {
		return fmt.Errorf("checking out %s: %w", commit, err)
	}
	sort.Slice(idx.Entries, func(i, j int) bool { return idx.Entries[i].Name < idx.Entries[j].Name })
	if err := s.repo.Storer.SetIndex(idx); err != nil {
		return fmt.Errorf("writing the index: %w", err)
	}
	if err := s.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, commit)); err != nil {
		return fmt.Errorf("detaching HEAD: %w", err)
	}
	s.tree.record(s.dir, commit)
	return nil
}

// openRepository opens the repository of the kept clone. Its pack files
// stay open until Close, where git.PlainOpen would open a pack file again
// for each object read: a commit, a push or a checkout reads thousands.
func (s *Session) openRepository() (*git.Repository, error) {
	wt := osfs.New(s.dir)
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
	storage := filesystem.NewStorageWithOptions(dot, cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
	s.storages = append(s.storages, storage)
	return git.Open(storage, wt)
}

// openClone opens the kept clone and checks that it is sound enough to
// fetch into: HEAD, the index and the fetched branch tip with its tree.
func (s *Session) openClone() (*git.Repository, error) {
	repo, err := s.openRepository()
	if err != nil {
		return nil, err
	}
	if _, err := repo.Head(); err != nil {
		return nil, fmt.Errorf("reading HEAD: %w", err)
	}
	if _, err := repo.Storer.Index(); err != nil {
		return nil, fmt.Errorf("reading the index: %w", err)
	}
	ref, err := repo.Reference(trackingRef(s.branch), true)
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

// fetch fetches the branch (and the push branch) into repo and fails with
// errHistoryRewritten when the branch's new tip does not descend from the
// one fetched before.
func (s *Session) fetch(ctx context.Context, repo *git.Repository) error {
	before, err := repo.Reference(trackingRef(s.branch), true)
	if err != nil {
		return fmt.Errorf("reading the fetched branch: %w", err)
	}
	specs := []config.RefSpec{trackingSpec(s.branch)}
	if s.pushBranch != s.branch {
		specs = append(specs, trackingSpec(s.pushBranch))
	}
	err = s.fetchSpecs(ctx, repo, specs)
	if errors.Is(err, ErrRefNotFound) && len(specs) > 1 {
		// The push branch may not exist yet: fetch the branch alone.
		err = s.fetchSpecs(ctx, repo, specs[:1])
		if err == nil {
			err = removeRef(repo, trackingRef(s.pushBranch))
		}
	}
	if err != nil {
		return err
	}
	after, err := repo.Reference(trackingRef(s.branch), true)
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
		err := s.fetchSpecs(ctx, repo, []config.RefSpec{trackingSpec(s.pushBranch)})
		if err != nil && !errors.Is(err, ErrRefNotFound) {
			return err
		}
	}
	return s.readPushTip(repo)
}

func (s *Session) fetchSpecs(ctx context.Context, repo *git.Repository, specs []config.RefSpec) error {
	err := repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: remoteName,
		RefSpecs:   specs,
		Auth:       s.remote.auth,
		CABundle:   s.remote.caBundle,
		Tags:       git.NoTags,
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
	ref, err := repo.Reference(trackingRef(s.pushBranch), true)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("reading the fetched push branch: %w", err)
	}
	s.pushTip = ref.Hash()
	return nil
}

// checkout detaches HEAD at the branch tip and makes the working tree match
// it exactly, dropping what an earlier use left there.
func (s *Session) checkout() error {
	return s.resetTo(s.branchTip())
}

// branchTip returns the fetched tip of the branch; sync has checked that it
// exists.
func (s *Session) branchTip() plumbing.Hash {
	ref, err := s.repo.Reference(trackingRef(s.branch), true)
	if err != nil {
		return plumbing.ZeroHash
	}
	return ref.Hash()
}

// resetTo detaches HEAD at commit and makes the index and working tree match
// it, removing untracked files. A working tree that an earlier session left
// clean at HEAD is moved by the difference between the two commits, which
// costs reading the files' metadata once; any other is hard reset, which
// costs rewriting and reading every file.
func (s *Session) resetTo(commit plumbing.Hash) error {
	if s.tree.cleanAt(s.dir, commit) {
		return nil
	}
	if switched, err := s.switchCleanTree(commit); err == nil && switched {
		return nil
	}
	// The hard reset below repairs whatever the switch did or did not do.
	s.tree.invalidate()
	w, err := s.repo.Worktree()
	if err != nil {
		return fmt.Errorf("opening the working tree: %w", err)
	}
	head, err := s.repo.Reference(plumbing.HEAD, true)
	if err != nil || head.Hash() != commit {
		if err := s.hardReset(w, commit); err != nil {
			return err
		}
	}
	status, err := w.Status()
	if err != nil {
		return fmt.Errorf("reading the working tree status: %w", err)
	}
	var untracked []string
	dirty := false
	for path, st := range status {
		switch {
		case st.Worktree == git.Untracked:
			untracked = append(untracked, path)
		case st.Worktree != git.Unmodified || st.Staging != git.Unmodified:
			dirty = true
		}
	}
	if dirty {
		if err := s.hardReset(w, commit); err != nil {
			return err
		}
	}
	for _, path := range untracked {
		if err := s.removeFile(path); err != nil {
			return fmt.Errorf("removing untracked file: %w", err)
		}
	}
	s.tree.record(s.dir, commit)
	return nil
}

func (s *Session) hardReset(w *git.Worktree, commit plumbing.Hash) error {
	if err := s.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, commit)); err != nil {
		return fmt.Errorf("detaching HEAD: %w", err)
	}
	if err := w.Reset(&git.ResetOptions{Commit: commit, Mode: git.HardReset}); err != nil {
		return fmt.Errorf("resetting the working tree to %s: %w", commit, err)
	}
	return nil
}

func trackingRef(branch string) plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName(remoteName, branch)
}

func trackingSpec(branch string) config.RefSpec {
	return config.RefSpec(fmt.Sprintf("+%s:%s", plumbing.NewBranchReferenceName(branch), trackingRef(branch)))
}

func removeRef(repo *git.Repository, name plumbing.ReferenceName) error {
	if err := repo.Storer.RemoveReference(name); err != nil && !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return fmt.Errorf("removing %s: %w", name, err)
	}
	return nil
}
