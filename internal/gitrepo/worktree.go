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
	"time"

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
// index part lasts while the index file keeps the modification time and
// size it had when recorded, so that a change made to it by anyone else
// (git add in the clone) voids it and what depends on it; the working tree
// part lasts until the working tree is handed to someone who may write it
// (handedOver). The zero value knows nothing.
type worktreeState struct {
	commit  plumbing.Hash
	clean   bool
	index   plumbing.Hash
	modTime time.Time
	size    int64
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
	*w = worktreeState{commit: commit, clean: true, index: commit, modTime: info.ModTime(), size: info.Size()}
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
	if err != nil || !info.ModTime().Equal(w.modTime) || info.Size() != w.size {
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

// applyTreeDiff writes to the working tree and to idx (unless nil) the files that differ
// between the trees of commits from and to: removed files first, so that a
// file may become a directory and the other way round, then added and
// changed ones. It fails with a *BadCommitError, before writing anything,
// when a tree of to that differs from from's holds an entry that is not a
// valid path; from's were checked when it was checked out.
func (s *Session) applyTreeDiff(idx *index.Index, from, to plumbing.Hash) error {
	fromTree, err := s.commitTree(from)
	if err != nil {
		return err
	}
	toTree, err := s.commitTree(to)
	if err != nil {
		return err
	}
	var d treeDiff
	if err := d.compare(s, "", fromTree, toTree); err != nil {
		return inCommit(fmt.Errorf("comparing the trees of %s and %s: %w", from, to, err), to)
	}
	root, err := s.worktree()
	if err != nil {
		return err
	}
	for _, path := range d.removed {
		if err := removeFile(root, path); err != nil {
			return err
		}
		if idx == nil {
			continue
		}
		if _, err := idx.Remove(path); err != nil && !errors.Is(err, index.ErrEntryNotFound) {
			return fmt.Errorf("removing %s from the index: %w", path, err)
		}
	}
	for _, entry := range d.written {
		info, err := s.writeEntry(root, entry.Name, entry)
		if err != nil {
			return err
		}
		if idx == nil {
			continue
		}
		e, err := idx.Entry(entry.Name)
		if errors.Is(err, index.ErrEntryNotFound) {
			e = idx.Add(entry.Name)
		} else if err != nil {
			return fmt.Errorf("checking out %s: %w", entry.Name, err)
		}
		*e = index.Entry{
			Name: entry.Name, Hash: entry.Hash, Mode: entry.Mode,
			ModifiedAt: info.ModTime(), Size: indexSize(info.Size()),
		}
	}
	return nil
}

// treeDiff lists the files that differ between two trees. Unlike
// object.DiffTree, which reads every subtree of the directories it walks,
// it reads only the subtrees whose hashes differ: in a repository of
// thousands of directories, a few dozen objects instead of thousands.
type treeDiff struct {
	// removed are the paths of files of the first tree that the second
	// lacks.
	removed []string
	// written are the files of the second tree that the first lacks or
	// holds with another content or mode, named by their full path.
	written []object.TreeEntry
}

// compare adds to d the differences between the trees from and to, found
// at prefix. Every entry of to, and of the subtrees of to it reads, must
// be a valid path (checkEntries).
func (d *treeDiff) compare(s *Session, prefix string, from, to *object.Tree) error {
	if err := checkEntries(to, prefix); err != nil {
		return err
	}
	old := make(map[string]object.TreeEntry, len(from.Entries))
	for _, e := range from.Entries {
		old[e.Name] = e
	}
	for _, e := range to.Entries {
		o, ok := old[e.Name]
		delete(old, e.Name)
		switch {
		case ok && o.Hash == e.Hash && o.Mode == e.Mode:
		case ok && o.Mode == filemode.Dir && e.Mode == filemode.Dir:
			a, err := s.repo.TreeObject(o.Hash)
			if err != nil {
				return err
			}
			b, err := s.repo.TreeObject(e.Hash)
			if err != nil {
				return err
			}
			if err := d.compare(s, prefix+e.Name+"/", a, b); err != nil {
				return err
			}
		default:
			// A file replacing a file is written over it; a directory
			// replacing a file, or the other way round, replaces it.
			if ok && (o.Mode == filemode.Dir || e.Mode == filemode.Dir) {
				if err := d.remove(s, prefix, o); err != nil {
					return err
				}
			}
			if err := d.write(s, prefix, e); err != nil {
				return err
			}
		}
	}
	for _, o := range old {
		if err := d.remove(s, prefix, o); err != nil {
			return err
		}
	}
	return nil
}

// remove adds the file, or every file of the directory, e at prefix to
// d.removed.
func (d *treeDiff) remove(s *Session, prefix string, e object.TreeEntry) error {
	return eachFile(s, prefix, e, func(f object.TreeEntry) error {
		d.removed = append(d.removed, f.Name)
		return nil
	})
}

// write adds the file, or every file of the directory, e at prefix to
// d.written.
func (d *treeDiff) write(s *Session, prefix string, e object.TreeEntry) error {
	return eachFile(s, prefix, e, func(f object.TreeEntry) error {
		d.written = append(d.written, f)
		return nil
	})
}

// eachFile calls fn with the entry e at prefix when it is a file, or with
// each file of the directory, each named by its full path. The entries of
// every directory it reads must be valid paths (checkEntries). Submodules,
// which have no files in the repository, are left out, as git's checkout
// leaves them empty.
func eachFile(s *Session, prefix string, e object.TreeEntry, fn func(object.TreeEntry) error) error {
	if e.Mode.IsFile() {
		e.Name = prefix + e.Name
		return fn(e)
	}
	if e.Mode != filemode.Dir {
		return nil
	}
	tree, err := s.repo.TreeObject(e.Hash)
	if err != nil {
		return err
	}
	prefix += e.Name + "/"
	if err := checkEntries(tree, prefix); err != nil {
		return err
	}
	for _, child := range tree.Entries {
		if err := eachFile(s, prefix, child, fn); err != nil {
			return err
		}
	}
	return nil
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
