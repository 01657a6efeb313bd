package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/uprev-dev/uprev/internal/confined"
)

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
// users of it (for ctx, and at most the remote's timeout; not at all when
// ctx says WakeWhenFree), then clones or fetches it and checks out the tip
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

// ErrCloneBusy means the kept clone a run asked for is in use by another
// run, and the run asked not to wait for it (WakeWhenFree): it is woken
// when the clone is given back.
var ErrCloneBusy = errors.New("another run is using it")

// waiter is a user that found a kept clone in use: its owner, and how it
// is woken.
type waiter struct {
	owner string
	wake  func()
}

// wakeKey is the context key of WakeWhenFree.
type wakeKey struct{}

// WakeWhenFree returns ctx for a run that must not wait for a kept clone
// in use: Open and OpenRevision then fail at once with ErrCloneBusy, and
// wake is called once, when the clone is given back. Of the runs that
// found a clone in use, the first is woken; each of them runs it and is
// woken after it in turn.
func WakeWhenFree(ctx context.Context, wake func()) context.Context {
	return context.WithValue(ctx, wakeKey{}, wake)
}

// session claims the checkout name of remote's repository for owner, locks
// it, waiting for other users of it (or for ctx, or not at all: see
// WakeWhenFree), and returns a session on it that pins its object store.
func (c *Cache) session(ctx context.Context, remote *Remote, name, owner string) (*Session, error) {
	wake, noWait := ctx.Value(wakeKey{}).(func())
	c.mu.Lock()
	kc := c.clone(c.repository(repositoryKey(remote.URL)), name)
	if owner != "" {
		c.owners[owner] = kc
	}
	if noWait {
		// Under the Cache's mutex, as Close gives the lock back and wakes
		// the first waiter under it: no wake-up is lost in between.
		select {
		case kc.lock <- struct{}{}:
		default:
			kc.waiting = append(slices.DeleteFunc(kc.waiting, func(w waiter) bool { return owner != "" && w.owner == owner }), waiter{owner: owner, wake: wake})
			c.mu.Unlock()
			return nil, fmt.Errorf("the kept clone of %s: %w", remote.Redacted(), ErrCloneBusy)
		}
	}
	kc.users++
	c.mu.Unlock()
	if !noWait {
		if err := c.waitFor(ctx, remote, kc); err != nil {
			return nil, err
		}
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

// waitFor locks kc, counted among its users, waiting for its other users
// for ctx and at most the remote's timeout; on failure it is no longer
// counted.
func (c *Cache) waitFor(ctx context.Context, remote *Remote, kc *keptClone) error {
	// The wait is real time, as the network operations it waits for are.
	timer := time.NewTimer(remote.timeout())
	defer timer.Stop()
	var waitErr error
	select {
	case kc.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		waitErr = ctx.Err()
	case <-timer.C:
		waitErr = fmt.Errorf("%w: another run has used it for more than %s", ErrTimeout, remote.timeout())
	}
	c.mu.Lock()
	kc.users--
	kc.lastUsed = c.clock.Now()
	c.mu.Unlock()
	return fmt.Errorf("waiting for the kept clone of %s: %w", remote.Redacted(), waitErr)
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
		<-s.clone.lock
		var first waiter
		if len(s.clone.waiting) > 0 {
			first = s.clone.waiting[0]
			s.clone.waiting = slices.Delete(s.clone.waiting, 0, 1)
		}
		c.mu.Unlock()
		s.pinned = nil
		s.clone = nil
		if first.wake != nil {
			first.wake()
		}
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

// UsePushBranch makes branch the push branch of the session's next
// WriteBack, as if the session had been opened with it: the branch and
// the new push branch are fetched, and the working tree is checked out at
// the branch's tip. It lets one session write several push branches in
// turn, one WriteBack each, under one lock of the kept clone. Empty means
// the branch itself.
func (s *Session) UsePushBranch(ctx context.Context, branch string) error {
	if branch == "" {
		branch = s.branch
	}
	s.pushBranch, s.wroteBack = branch, false
	if err := s.sync(ctx); err != nil {
		return fmt.Errorf("fetching push branch %q of %s: %w", branch, s.remote.Redacted(), err)
	}
	return nil
}
