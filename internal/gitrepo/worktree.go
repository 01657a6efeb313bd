package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/uprev-dev/uprev/internal/confined"
)

// worktreeChanges returns the paths where the working tree differs from the
// index idx, as `git status` finds them: tracked files changed (content or
// mode) or missing, and untracked files that no .gitignore ignores.
//
// Like git, it trusts a file whose size and modification time are those
// the index recorded, and reads and hashes the others. An entry recorded no
// earlier than the index was written is racily clean (the file may have
// changed again within the same timestamp tick) and is hashed as well.
// Reading 5,000 files' metadata costs a few tens of milliseconds, where
// go-git's Worktree.Status hashes every file.
func (s *Session) worktreeChanges(idx *index.Index) ([]string, error) {
	indexWritten, err := os.Stat(filepath.Join(s.dir, ".git", "index"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the index: %w", err)
	}
	root, err := s.worktree()
	if err != nil {
		return nil, err
	}
	entries := make(map[string]int, len(idx.Entries))
	for i, e := range idx.Entries {
		entries[e.Name] = i
	}
	seen := make([]bool, len(idx.Entries))
	var changed, untracked []string
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		i, tracked := entries[name]
		if d.IsDir() {
			if tracked && idx.Entries[i].Mode == filemode.Submodule {
				seen[i] = true
				return fs.SkipDir
			}
			return nil
		}
		if !tracked {
			untracked = append(untracked, name)
			return nil
		}
		seen[i] = true
		info, err := d.Info()
		if err != nil {
			return err
		}
		same, err := matchesEntry(root, name, info, idx.Entries[i], indexWritten)
		if err != nil {
			return err
		}
		if !same {
			changed = append(changed, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the working tree: %w", err)
	}
	for i, e := range idx.Entries {
		if !seen[i] {
			changed = append(changed, e.Name)
		}
	}
	untracked, err = s.withoutIgnored(untracked)
	if err != nil {
		return nil, err
	}
	return append(changed, untracked...), nil
}

// matchesEntry reports whether the file name of root, described by info,
// holds what the index entry e records. indexWritten describes the index
// file, nil when there is none.
func matchesEntry(root *confined.Root, name string, info fs.FileInfo, e *index.Entry, indexWritten fs.FileInfo) (bool, error) {
	mode, err := filemode.NewFromOSFileMode(info.Mode())
	if err != nil {
		return false, nil
	}
	want := e.Mode
	if want == filemode.Deprecated {
		want = filemode.Regular
	}
	if mode != want {
		return false, nil
	}
	racy := indexWritten == nil || !e.ModifiedAt.Before(indexWritten.ModTime())
	if !racy && indexSize(info.Size()) == e.Size && info.ModTime().Equal(e.ModifiedAt) {
		return true, nil
	}
	content, err := blobContent(root, name, info)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", name, err)
	}
	return plumbing.ComputeHash(plumbing.BlobObject, content) == e.Hash, nil
}

// withoutIgnored drops from untracked the paths that the repository's
// .gitignore files ignore, as go-git's status does.
func (s *Session) withoutIgnored(untracked []string) ([]string, error) {
	if len(untracked) == 0 {
		return nil, nil
	}
	w, err := s.repo.Worktree()
	if err != nil {
		return nil, fmt.Errorf("opening the working tree: %w", err)
	}
	patterns, err := gitignore.ReadPatterns(w.Filesystem, nil)
	if err != nil {
		// go-git's status ignores unreadable .gitignore files too.
		return untracked, nil
	}
	patterns = append(patterns, w.Excludes...)
	if len(patterns) == 0 {
		return untracked, nil
	}
	m := gitignore.NewMatcher(patterns)
	kept := untracked[:0]
	for _, path := range untracked {
		if !m.Match(strings.Split(path, "/"), false) {
			kept = append(kept, path)
		}
	}
	return kept, nil
}

// switchCleanTree moves a working tree that is clean at HEAD to commit by
// writing and removing only the files that differ between the two commits,
// where a hard reset rewrites every file and a status reads them all again.
// A working tree that s.tree knows clean is neither read nor is the index
// rewritten: the index is left behind, at a commit s.tree remembers, and
// brought up to date only when something needs it (currentIndex). Any
// other working tree is first compared with the index. It reports false,
// having changed nothing, when it cannot know the tree is clean: HEAD or
// the index is not what s.tree knows, or the working tree differs from it.
func (s *Session) switchCleanTree(commit plumbing.Hash) (bool, error) {
	// An unreadable HEAD or index is for the full reset to repair.
	head, err := s.repo.Storer.Reference(plumbing.HEAD)
	if err != nil || head.Type() != plumbing.HashReference || head.Hash() != s.tree.commit || s.tree.indexCommit(s.dir).IsZero() {
		return false, nil
	}
	if s.tree.cleanAt(s.dir, head.Hash()) {
		if head.Hash() != commit {
			state := s.tree
			s.tree.invalidate()
			if err := s.applyTreeDiff(nil, head.Hash(), commit); err != nil {
				return false, err
			}
			if err := s.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, commit)); err != nil {
				return false, fmt.Errorf("detaching HEAD: %w", err)
			}
			s.tree = state.moved(commit)
		}
		return true, nil
	}
	// A working tree that was handed out is compared with the index first.
	idx, err := s.currentIndex()
	if err != nil {
		return false, nil
	}
	changes, err := s.worktreeChanges(idx)
	if err != nil || len(changes) > 0 {
		return false, err
	}
	s.tree.invalidate()
	if head.Hash() != commit {
		if err := s.applyTreeDiff(idx, head.Hash(), commit); err != nil {
			return false, err
		}
	}
	if err := s.repo.Storer.SetIndex(idx); err != nil {
		return false, fmt.Errorf("writing the index: %w", err)
	}
	if err := s.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, commit)); err != nil {
		return false, fmt.Errorf("detaching HEAD: %w", err)
	}
	s.tree.record(s.dir, commit)
	return true, nil
}

// currentIndex reads the index. When s.tree knows that it holds an older
// commit than HEAD, as a clean working tree moved without it leaves it,
// the entries of the files that differ between the two commits are brought
// to HEAD's, with no stat data, so that a comparison with the working tree
// reads those files; the index file is not written.
func (s *Session) currentIndex() (*index.Index, error) {
	idx, err := s.repo.Storer.Index()
	if err != nil {
		return nil, fmt.Errorf("reading the index: %w", err)
	}
	from := s.tree.indexCommit(s.dir)
	if from.IsZero() || from == s.tree.commit {
		return idx, nil
	}
	fromTree, err := s.commitTree(from)
	if err != nil {
		return nil, err
	}
	toTree, err := s.commitTree(s.tree.commit)
	if err != nil {
		return nil, err
	}
	var d treeDiff
	if err := d.compare(s, "", fromTree, toTree); err != nil {
		return nil, inCommit(fmt.Errorf("comparing the trees of %s and %s: %w", from, s.tree.commit, err), s.tree.commit)
	}
	entries := make(map[string]*index.Entry, len(idx.Entries))
	for _, e := range idx.Entries {
		entries[e.Name] = e
	}
	for _, path := range d.removed {
		delete(entries, path)
	}
	for _, f := range d.written {
		entries[f.Name] = &index.Entry{Name: f.Name, Hash: f.Hash, Mode: f.Mode}
	}
	idx.Entries = slices.SortedFunc(maps.Values(entries), func(a, b *index.Entry) int { return strings.Compare(a.Name, b.Name) })
	return idx, nil
}

// worktreeState is what a user of a kept clone knows of its HEAD, index and
// working tree, from what it did itself: the commit at HEAD, whether the
// working tree holds exactly its tree, and the commit whose tree the index
// holds exactly, which may be an older one than HEAD (a working tree known
// clean moves without the index, which costs writing every entry). The
// index part lasts while the index is the file recorded (git writes a new
// index and renames it over the old), with the modification time and size
// it had then, so that a change made to it by anyone else (git add in the
// clone) voids it and what depends on it, even within one tick of the
// file system's clock, which is milliseconds coarse; the working tree
// part lasts until the working tree is handed to someone who may write it
// (handedOver). The zero value knows nothing.
type worktreeState struct {
	commit plumbing.Hash
	clean  bool
	index  plumbing.Hash
	// indexFile is the index file as recorded: its identity (os.SameFile),
	// modification time and size.
	indexFile os.FileInfo
}

// record notes that the index of the clone in dir, as it is on disk now,
// holds the tree of commit, checked out at HEAD, and that the working tree
// holds exactly the index.
func (w *worktreeState) record(dir string, commit plumbing.Hash) {
	info, err := os.Stat(filepath.Join(dir, ".git", "index"))
	if err != nil {
		w.invalidate()
		return
	}
	*w = worktreeState{commit: commit, clean: true, index: commit, indexFile: info}
}

// moved returns the state once HEAD moved to commit and the working tree
// was made to hold exactly its tree, the index left as it was.
func (w worktreeState) moved(commit plumbing.Hash) worktreeState {
	w.commit, w.clean = commit, true
	return w
}

// invalidate forgets everything: HEAD or the index is about to change.
func (w *worktreeState) invalidate() {
	*w = worktreeState{}
}

// handedOver returns what remains known once the working tree is handed to
// someone who may write files in it (an edit, the clone's next user): HEAD
// and the index, not the working tree.
func (w worktreeState) handedOver() worktreeState {
	w.clean = false
	return w
}

// indexCommit returns the commit whose tree the index of the clone in dir
// is known to hold, zero when it is not known.
func (w worktreeState) indexCommit(dir string) plumbing.Hash {
	if w.index.IsZero() {
		return plumbing.ZeroHash
	}
	info, err := os.Stat(filepath.Join(dir, ".git", "index"))
	if err != nil || !os.SameFile(info, w.indexFile) || !info.ModTime().Equal(w.indexFile.ModTime()) || info.Size() != w.indexFile.Size() {
		return plumbing.ZeroHash
	}
	return w.index
}

// cleanAt reports whether HEAD and the working tree of the clone in dir are
// known to hold exactly the tree of commit, and its index what s.tree
// knows of it (no one else used the clone's git since).
func (w worktreeState) cleanAt(dir string, commit plumbing.Hash) bool {
	return w.clean && !commit.IsZero() && w.commit == commit && !w.indexCommit(dir).IsZero()
}

// commitTree returns the tree of the commit hash.
func (s *Session) commitTree(hash plumbing.Hash) (*object.Tree, error) {
	c, err := s.repo.CommitObject(hash)
	if err != nil {
		return nil, fmt.Errorf("reading commit %s: %w", hash, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("reading the tree of %s: %w", hash, err)
	}
	return tree, nil
}

// worktree returns the working tree of the session as a confined root,
// through which every file of it is written, removed and read, so that
// no name from a tree can reach beyond it. The session opens it once; a
// new clone (cloneInto) closes it.
func (s *Session) worktree() (*confined.Root, error) {
	if s.root == nil {
		root, err := confined.Open(s.dir)
		if err != nil {
			return nil, fmt.Errorf("opening the working tree: %w", err)
		}
		s.root = root
	}
	return s.root, nil
}

// closeWorktree releases the working tree opened by worktree.
func (s *Session) closeWorktree() {
	if s.root != nil {
		_ = s.root.Close() // a directory opened for reading; nothing is lost
		s.root = nil
	}
}

// removeFile removes a file of the working tree root and the directories
// it leaves empty.
func removeFile(root *confined.Root, path string) error {
	if err := root.Remove(path); err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// clearWorktree removes everything from the working tree but .git.
func (s *Session) clearWorktree() error {
	root, err := s.worktree()
	if err != nil {
		return err
	}
	entries, err := root.ReadDir(".")
	if err != nil {
		return fmt.Errorf("reading the working tree: %w", err)
	}
	for _, e := range entries {
		if e.Name() == git.GitDirName {
			continue
		}
		if err := root.RemoveAll(e.Name()); err != nil {
			return fmt.Errorf("clearing the working tree: %w", err)
		}
	}
	return nil
}
