package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"k8s.io/utils/clock"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/uprev-dev/uprev/internal/confined"
)

// DefaultPushAttempts is how many times WriteBack pushes when the remote
// branch keeps moving, unless WriteBackOptions says otherwise.
const DefaultPushAttempts = 5

// EditFunc changes files in the working tree dir and returns the message of
// the commit that records the change, "" when it changed nothing, and the
// files it wrote. The message comes from the edit because it lists what
// changed, which can differ between attempts. WriteBack runs it again, on a
// fresh working tree, each time a push is rejected because the remote
// branch moved. Even with a message, nothing is committed when git sees no
// change.
//
// history is the history of the branch and the push branch as fetched for
// this attempt: the working tree is built on their tips. Whatever rules
// what may be written (the holds of reverts) is read from it on every
// attempt, so that what is pushed is judged against the history it lands
// on, also when someone pushed a revert just before.
type EditFunc func(dir string, history *History) (Edit, error)

// Edit is what an EditFunc did.
type Edit struct {
	// Message is the message of the commit, "" when nothing changed.
	Message string
	// Files are the files the edit wrote or removed, slash-separated and
	// relative to dir, every one of them. With them, the commit is built
	// from its parent's tree by replacing those files' blobs and the trees
	// along their paths, which costs what changed, and the working tree is
	// known to hold the commit afterwards; empty (not nil) says the edit
	// wrote nothing. Nil means the edit does not know: the whole working
	// tree is compared with the index.
	Files []string
}

// WriteBackOptions describes the commit WriteBack makes.
type WriteBackOptions struct {
	// AuthorName and AuthorEmail identify the author and committer.
	AuthorName, AuthorEmail string
	// Signer signs the commit; nil leaves it unsigned.
	Signer *Signer
	// MaxAttempts bounds the pushes; zero means DefaultPushAttempts.
	MaxAttempts int
	// PushOptions are sent to the server with each push (git push -o).
	PushOptions map[string]string
	// AlsoPushTo, when set, is a ref (such as refs/for/main, for Gerrit)
	// the pushed commit is pushed to as well, once it is on the push
	// branch; never forced.
	AlsoPushTo string
	// Clock tells the commit's time; nil means the wall clock.
	Clock clock.PassiveClock
}

// WriteBack lets edit change the working tree and, when it changed
// something, commits that as one commit and pushes it to the push branch,
// never forcing. It returns the pushed commit's SHA, or "" when nothing
// changed.
//
// The commit is made on top of the push branch. When the push branch differs
// from the branch and does not exist on the remote, it starts at the branch
// tip; when it exists and lacks commits of the branch, they are brought in:
// by a fast-forward when the push branch has nothing of its own, otherwise
// by making the commit a merge of the branch into the push branch, in which
// files changed on both sides take the branch's version before edit runs.
//
// WriteBack may be called once per Session and push branch (see
// UsePushBranch). A push rejected because the push branch moved is
// retried on the new tip (fetch, reset, edit, commit) up to MaxAttempts
// times, then fails with a *PushRejectedError; nothing anyone else pushed
// is lost.
func (s *Session) WriteBack(ctx context.Context, opts WriteBackOptions, edit EditFunc) (string, error) {
	if s.wroteBack {
		return "", errors.New("writing back: the session has already been written back")
	}
	s.wroteBack, s.handedOut = true, true
	attempts := opts.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultPushAttempts
	}
	for attempt := 1; ; attempt++ {
		expected := s.remotePushTip()
		parents, err := s.startCommit()
		if err != nil {
			return "", fmt.Errorf("preparing branch %q: %w", s.pushBranch, err)
		}
		commit, err := s.commit(opts, parents, edit)
		if err != nil || commit.IsZero() {
			return "", err
		}
		err = s.push(ctx, commit, plumbing.NewBranchReferenceName(s.pushBranch), opts.PushOptions)
		if err == nil {
			if err := s.pushed(commit); err != nil {
				return commit.String(), err
			}
			return commit.String(), s.alsoPush(ctx, commit, opts)
		}
		if isRemoteError(err) || ctx.Err() != nil {
			return "", fmt.Errorf("pushing to branch %q: %w", s.pushBranch, err)
		}
		if serr := s.sync(ctx); serr != nil {
			return "", fmt.Errorf("pushing to branch %q: %w (fetching afterwards: %w)", s.pushBranch, err, serr)
		}
		if s.remotePushTip() == expected {
			// The branch did not move: the rejection has another cause.
			return "", fmt.Errorf("pushing to branch %q: %w", s.pushBranch, err)
		}
		if attempt == attempts {
			return "", &PushRejectedError{Branch: s.pushBranch, Attempts: attempts, Err: err}
		}
	}
}

// remotePushTip returns the fetched tip of the push branch, zero when it
// does not exist on the remote.
func (s *Session) remotePushTip() plumbing.Hash {
	if s.pushBranch == s.branch {
		return s.branchTip()
	}
	return s.pushTip
}

// startCommit checks out the commit to build on and returns the parents of
// the commit to make.
func (s *Session) startCommit() ([]plumbing.Hash, error) {
	tip := s.branchTip()
	if s.pushTip.IsZero() || s.pushTip == tip {
		return []plumbing.Hash{tip}, s.resetTo(tip)
	}
	pushCommit, err := s.repo.CommitObject(s.pushTip)
	if err != nil {
		return nil, fmt.Errorf("reading the push branch tip: %w", err)
	}
	tipCommit, err := s.repo.CommitObject(tip)
	if err != nil {
		return nil, fmt.Errorf("reading the branch tip: %w", err)
	}
	if upToDate, err := tipCommit.IsAncestor(pushCommit); err != nil || upToDate {
		return []plumbing.Hash{s.pushTip}, errors.Join(err, s.resetTo(s.pushTip))
	}
	if behind, err := pushCommit.IsAncestor(tipCommit); err != nil || behind {
		return []plumbing.Hash{tip}, errors.Join(err, s.resetTo(tip))
	}
	if err := s.resetTo(s.pushTip); err != nil {
		return nil, err
	}
	if err := s.mergeIntoWorktree(pushCommit, tipCommit); err != nil {
		return nil, fmt.Errorf("merging branch %q into %q: %w", s.branch, s.pushBranch, err)
	}
	return []plumbing.Hash{s.pushTip, tip}, nil
}

// commit runs edit and commits what it changed with parents, returning the
// zero hash when nothing changed. When the working tree held exactly the
// tree of the one parent and the edit names the files it wrote, the commit
// is built from the parent's tree (commitFiles); otherwise from the index,
// after comparing the working tree with it.
func (s *Session) commit(opts WriteBackOptions, parents []plumbing.Hash, edit EditFunc) (plumbing.Hash, error) {
	s.editBase = plumbing.ZeroHash
	if s.tree.cleanAt(s.dir, s.tree.commit) {
		s.editBase = s.tree.commit
	}
	before := s.tree
	s.tree = s.tree.handedOver()
	done, err := edit(s.dir, s.History(HistoryOptions{}))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("editing files: %w", err)
	}
	if done.Files != nil && len(done.Files) == 0 && !s.editBase.IsZero() {
		// Nothing written: the working tree is as clean as it was.
		s.tree, s.handedOut = before, false
		return plumbing.ZeroHash, nil
	}
	if done.Message == "" {
		return plumbing.ZeroHash, nil
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	who := object.Signature{Name: opts.AuthorName, Email: opts.AuthorEmail, When: clk.Now()}
	if done.Files != nil && len(parents) == 1 && parents[0] == s.editBase {
		hash, built, err := s.commitFiles(parents[0], done, who, opts.Signer)
		if err != nil || built {
			if err == nil {
				// The working tree holds the commit's tree (the parent's when
				// nothing changed): what the edit wrote is committed. The
				// index stays behind.
				s.tree, s.handedOut = before, false
				if !hash.IsZero() {
					s.tree = before.moved(hash)
				}
			}
			return hash, err
		}
	}
	idx, err := s.currentIndex()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	paths, err := s.worktreeChanges(idx)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if len(paths) == 0 {
		return plumbing.ZeroHash, nil
	}
	if err := s.stageInto(idx, paths); err != nil {
		return plumbing.ZeroHash, err
	}
	w, err := s.repo.Worktree()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("opening the working tree: %w", err)
	}
	commitOpts := &git.CommitOptions{Author: &who, Committer: &who, Parents: parents}
	opts.Signer.apply(commitOpts)
	hash, err := w.Commit(done.Message, commitOpts)
	if errors.Is(err, git.ErrEmptyCommit) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("committing: %w", err)
	}
	// The commit holds the index, which holds the working tree: what the
	// edit wrote is committed, and the next user of the clone need not
	// read the working tree to know it clean.
	s.tree.record(s.dir, hash)
	s.handedOut = false
	return hash, nil
}

// stageInto stores the working tree's version of each path as a blob and
// updates idx with them, then writes it in one write, as `git add --all
// <paths>` would; a path missing from the working tree leaves the index.
func (s *Session) stageInto(idx *index.Index, paths []string) error {
	// From here on, the index holds more than HEAD.
	s.tree.invalidate()
	root, err := s.worktree()
	if err != nil {
		return err
	}
	for _, path := range paths {
		info, err := root.Lstat(path)
		// A path whose parent became a file (ENOTDIR) or that became a
		// directory is gone as a file.
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && info.IsDir()) {
			if _, err := idx.Remove(path); err != nil && !errors.Is(err, index.ErrEntryNotFound) {
				return fmt.Errorf("unstaging %s: %w", path, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("staging %s: %w", path, err)
		}
		mode, err := filemode.NewFromOSFileMode(info.Mode())
		if err != nil {
			return fmt.Errorf("staging %s: %w", path, err)
		}
		hash, err := s.storeBlob(root, path, info)
		if err != nil {
			return fmt.Errorf("staging %s: %w", path, err)
		}
		entry, err := idx.Entry(path)
		if errors.Is(err, index.ErrEntryNotFound) {
			entry = idx.Add(path)
		} else if err != nil {
			return fmt.Errorf("staging %s: %w", path, err)
		}
		entry.Hash, entry.Mode, entry.ModifiedAt, entry.Size = hash, mode, info.ModTime(), indexSize(info.Size())
	}
	if err := s.repo.Storer.SetIndex(idx); err != nil {
		return fmt.Errorf("writing the index: %w", err)
	}
	return nil
}

// storeBlob writes the content of the file name of root (a symlink's
// target) to the object store and returns its hash.
func (s *Session) storeBlob(root *confined.Root, name string, info fs.FileInfo) (plumbing.Hash, error) {
	content, err := blobContent(root, name, info)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	obj := s.repo.Storer.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(content)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	_, werr := w.Write(content)
	if err := errors.Join(werr, w.Close()); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.repo.Storer.SetEncodedObject(obj)
}

// blobContent returns what Git stores as the blob of the file name of
// root, described by info: its content, or a symlink's target.
func blobContent(root *confined.Root, name string, info fs.FileInfo) ([]byte, error) {
	if info.Mode()&fs.ModeSymlink != 0 {
		target, err := root.Readlink(name)
		return []byte(filepath.ToSlash(target)), err
	}
	return root.ReadFile(name)
}
