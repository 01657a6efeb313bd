package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/uprev-dev/uprev/internal/confined"
)

// errHistoryRewritten means the remote branch no longer contains the commit
// the kept clone had fetched before.
var errHistoryRewritten = errors.New("remote branch history was rewritten")

// errStaleClone means a kept clone uses an object store other than its
// repository's newest, or none.
var errStaleClone = errors.New("the kept clone uses an old object store")

// Cache keeps clones of repositories under a directory. Each repository
// URL has one object store and kept clones that read and fetch into it: a
// working tree per branch read, and one each for tags, commits and commits
// of a branch, so that a repository is fetched and stored once however
// many of its branches, tags and commits are checked out. A clone is
// shared by every user of that repository and branch (or tags, or
// commits). A use locks its clone, fetches what is new, and works in its
// working tree; a clone that is damaged, or whose remote branch was
// rewritten, is replaced by a fresh one in a fresh object store.
//
// Users name themselves as owners when they open a clone; Release ends an
// owner's claim, and Sweep (run every 15 seconds by Start) removes the
// clones no owner claims once they are unused for 30 seconds, and the
// object stores no clone uses.
//
// The locks are in-process: one Cache per directory and process.
type Cache struct {
	root  string
	clock clock.WithTicker
	log   logr.Logger

	mu           sync.Mutex
	repositories map[string]*repository
	// owners are the claims: the clone each owner opened last.
	owners map[string]*keptClone

	cloneCount atomic.Int64
	fetchCount atomic.Int64
}

// keptClone is one checkout of the cache and the lock of its users.
type keptClone struct {
	// name names the checkout in its repository, and the refs it fetches
	// into the object store: refs/remotes/<name>/.
	name       string
	repository *repository
	dir        string
	lock       chan struct{}
	// tree is what the last user knew of the clone's index. Only the
	// holder of lock reads or writes it. It is kept in memory, so a clone
	// found on disk after a restart is first checked in full.
	tree worktreeState
	// store is the object store the checkout on disk uses, nil when there
	// is no checkout or its store is unknown. The Cache's mutex guards it
	// and the fields below.
	store *objectStore
	// users counts the sessions that hold or wait for lock.
	users int
	// lastUsed is when the last session closed, or when the clone was
	// found on disk.
	lastUsed time.Time
}

// CacheStats counts the network operations of a Cache.
type CacheStats struct {
	// Clones counts kept clones made, first ones and replacements. A
	// clone made in an object store that other clones of the repository
	// use fetches only what the store lacks.
	Clones int64
	// Fetches counts incremental fetches into kept clones, one per use of
	// a clone that was already there.
	Fetches int64
}

// CacheOptions tunes a Cache.
type CacheOptions struct {
	// Clock tells when clones are used and when Start sweeps; nil means
	// the real clock.
	Clock clock.WithTicker
	// Log receives what Start could not remove; the zero Logger discards.
	Log logr.Logger
}

// NewCache returns a Cache that keeps its clones under root, with the
// default options.
func NewCache(root string) (*Cache, error) {
	return NewCacheWithOptions(root, CacheOptions{})
}

// NewCacheWithOptions returns a Cache that keeps its clones under root,
// creating it. What a previous process left there is kept for its users
// to come back to, and swept like any unclaimed clone otherwise; clones
// and stores it was still writing are removed at once.
func NewCacheWithOptions(root string, opts CacheOptions) (*Cache, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("creating clone cache directory: %w", err)
	}
	c := &Cache{root: root, clock: opts.Clock, log: opts.Log, repositories: map[string]*repository{}, owners: map[string]*keptClone{}}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if err := c.load(); err != nil {
		return nil, fmt.Errorf("loading the clone cache: %w", err)
	}
	return c, nil
}

// Stats returns how many clones and fetches the cache has made.
func (c *Cache) Stats() CacheStats {
	return CacheStats{Clones: c.cloneCount.Load(), Fetches: c.fetchCount.Load()}
}

// OpenOptions says which branches a Session reads and writes, and for whom.
type OpenOptions struct {
	// Branch is the branch checked out. Clones are kept per URL and Branch.
	Branch string
	// PushBranch is the branch WriteBack pushes to; empty means Branch.
	PushBranch string
	// Owner names the user of the clone, such as
	// "UpdateAutomation/<namespace>/<name>": the clone is kept while the
	// owner claims it, from this Open until the owner opens another clone
	// or is released. Empty claims nothing.
	Owner string
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
	// store is the object store the session reads and fetches into.
	store *objectStore
	// pinned are the stores the session pinned, unpinned by Close.
	pinned []*objectStore
	// pushTip is the remote's push branch tip, zero when it does not exist.
	pushTip plumbing.Hash
	// tree is what the session knows of the index and working tree.
	tree worktreeState
	// revision is the commit OpenRevision checked out, zero for a session
	// at the tip of its branch.
	revision  plumbing.Hash
	wroteBack bool
	// editBase is the commit whose tree the working tree held exactly when
	// it was handed to the current edit, zero when it held a merge or was
	// not known clean (see FilesContaining).
	editBase plumbing.Hash
	// handedOut says the working tree was handed to code that may write
	// it (an edit, a caller of Dir), so that Close no longer knows it clean.
	handedOut bool
	// storages are the repositories the session opened, closed by Close.
	storages []*filesystem.Storage
	// root is the working tree opened as a confined root (worktree), nil
	// until then; closed by Close.
	root *confined.Root
}

// Open locks the kept clone of remote and opts.Branch, waiting for other
// users of it (for ctx, and at most the remote's timeout), then clones or fetches it and checks out the tip
// of the branch in its working tree.
func (c *Cache) Open(ctx context.Context, remote *Remote, opts OpenOptions) (*Session, error) {
	if opts.Branch == "" {
		return nil, errors.New("opening Git repository: no branch given")
	}
	if opts.PushBranch == "" {
		opts.PushBranch = opts.Branch
	}
	s, err := c.session(ctx, remote, branchCheckoutName(opts.Branch), opts.Owner)
	if err != nil {
		return nil, err
	}
	s.branch, s.pushBranch = opts.Branch, opts.PushBranch
	if err := s.sync(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("fetching branch %q of %s: %w", opts.Branch, remote.Redacted(), err)
	}
	return s, nil
}

// session claims the checkout name of remote's repository for owner, locks
// it, waiting for other users of it (or for ctx), and returns a session on
// it that pins its object store.
func (c *Cache) session(ctx context.Context, remote *Remote, name, owner string) (*Session, error) {
	c.mu.Lock()
	kc := c.clone(c.repository(repositoryKey(remote.URL)), name)
	kc.users++
	if owner != "" {
		c.owners[owner] = kc
	}
	c.mu.Unlock()
	// The wait is real time, as the network operations it waits for are.
	timer := time.NewTimer(remote.timeout())
	defer timer.Stop()
	var waitErr error
	select {
	case kc.lock <- struct{}{}:
	case <-ctx.Done():
		waitErr = ctx.Err()
	case <-timer.C:
		waitErr = fmt.Errorf("%w: another run has used it for more than %s", ErrTimeout, remote.timeout())
	}
	if waitErr != nil {
		c.mu.Lock()
		kc.users--
		kc.lastUsed = c.clock.Now()
		c.mu.Unlock()
		return nil, fmt.Errorf("waiting for the kept clone of %s: %w", remote.Redacted(), waitErr)
	}
	s := &Session{dir: kc.dir, remote: remote, cache: c, clone: kc, tree: kc.tree}
	c.mu.Lock()
	if kc.store != nil {
		s.store = kc.store
		s.store.pins++
		s.pinned = append(s.pinned, s.store)
	}
	c.mu.Unlock()
	return s, nil
}

// Close releases the kept clone for its next user. It is safe to call more
// than once.
func (s *Session) Close() {
	s.closeWorktree()
	for _, storage := range s.storages {
		_ = storage.Close() // read-only files; nothing is lost
	}
	s.storages = nil
	if s.clone != nil {
		s.clone.tree = s.tree
		if s.handedOut {
			s.clone.tree = s.tree.handedOver()
		}
		c := s.cache
		c.mu.Lock()
		for _, st := range s.pinned {
			st.pins--
		}
		s.clone.users--
		s.clone.lastUsed = c.clock.Now()
		c.mu.Unlock()
		s.pinned = nil
		<-s.clone.lock
		s.clone = nil
	}
}

// Dir returns the working tree of the session. Whatever the caller writes
// there is removed by the clone's next user.
func (s *Session) Dir() string {
	s.handedOut = true
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

// Revision returns the fetched tip of the session's branch as
// `<branch>@sha1:<commit>`, the form Flux writes source revisions in.
func (s *Session) Revision() string {
	return s.branch + "@sha1:" + s.branchTip().String()
}

// PushRevision returns the fetched tip of the push branch in the form of
// Revision, or "" when the push branch is the branch or does not exist on
// the remote.
func (s *Session) PushRevision() string {
	if tip := s.PushTip(); tip != "" {
		return s.pushBranch + "@sha1:" + tip
	}
	return ""
}

// PushTip returns the commit SHA at the fetched (or pushed) tip of the push
// branch, or "" when the push branch is the branch or does not exist on
// the remote.
func (s *Session) PushTip() string {
	if s.pushTip.IsZero() {
		return ""
	}
	return s.pushTip.String()
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
	return s.reclone(ctx, err)
}

// reclone clones the branch (and the push branch) next to the kept clone,
// in an object store chosen by why the kept clone could not be used, and
// replaces it only when the clone succeeded, so a network failure leaves
// it as it was.
func (s *Session) reclone(ctx context.Context, why error) error {
	err := s.replaceClone(ctx, why, func(repo *git.Repository) error {
		if err := s.fetchSpecs(ctx, repo, []config.RefSpec{s.trackingSpec(s.branch)}); err != nil {
			return fmt.Errorf("cloning: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := s.fetchPushBranch(ctx, s.repo); err != nil {
		return err
	}
	return s.checkoutFresh(s.branchTip())
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

// checkoutFresh writes the files of commit into the empty working tree of a
// new clone and an index for them, and detaches HEAD there. It does what a
// hard reset does on an empty working tree, several times faster. A tree
// entry that is not a valid path fails it with a *BadCommitError; what was
// written until then stays inside the working tree, and HEAD and the index
// are left as they were.
func (s *Session) checkoutFresh(commit plumbing.Hash) error {
	tree, err := s.commitTree(commit)
	if err != nil {
		return err
	}
	root, err := s.worktree()
	if err != nil {
		return err
	}
	idx := &index.Index{Version: 2}
	write := func(f object.TreeEntry) error {
		info, err := s.writeEntry(root, f.Name, f)
		if err != nil {
			return err
		}
		idx.Entries = append(idx.Entries, &index.Entry{
			Name: f.Name, Hash: f.Hash, Mode: f.Mode, ModifiedAt: info.ModTime(), Size: uint32(info.Size()),
		})
		return nil
	}
	err = checkEntries(tree, "")
	for i := 0; err == nil && i < len(tree.Entries); i++ {
		err = eachFile(s, "", tree.Entries[i], write)
	}
	if err != nil {
		return inCommit(fmt.Errorf("checking out %s: %w", commit, err), commit)
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
	if _, err := repo.Storer.Index(); err != nil {
		return nil, fmt.Errorf("reading the index: %w", err)
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

// checkout detaches HEAD at the branch tip and makes the working tree match
// it exactly, dropping what an earlier use left there.
func (s *Session) checkout() error {
	return s.resetTo(s.branchTip())
}

// branchTip returns the fetched tip of the branch; sync has checked that it
// exists.
func (s *Session) branchTip() plumbing.Hash {
	ref, err := s.repo.Reference(s.trackingRef(s.branch), true)
	if err != nil {
		return plumbing.ZeroHash
	}
	return ref.Hash()
}

// resetTo detaches HEAD at commit and makes the index and working tree match
// it exactly, removing whatever else is there. A working tree that an
// earlier session left clean at HEAD is moved by the difference between the
// two commits, which costs reading the files' metadata once; any other is
// emptied and checked out afresh, which costs writing every file.
func (s *Session) resetTo(commit plumbing.Hash) error {
	if s.tree.cleanAt(s.dir, commit) {
		return nil
	}
	switched, err := s.switchCleanTree(commit)
	var bad *BadCommitError
	switch {
	case errors.As(err, &bad):
		return err
	case err == nil && switched:
		return nil
	}
	// The fresh checkout below repairs whatever the switch did or did not do.
	s.tree.invalidate()
	if err := s.clearWorktree(); err != nil {
		return err
	}
	return s.checkoutFresh(commit)
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
