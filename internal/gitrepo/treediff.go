package gitrepo

import (
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
)

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
