// Package confined reads and writes the files of a directory through one
// root that no name can leave: not by `..`, not by an absolute name, not by
// a symbolic link that points outside. It wraps os.Root, which resolves
// every name relative to a directory it holds open, so that a name that
// comes from outside (a Git tree entry, a Sync path, a kustomization field)
// can never reach a file beyond the directory, whatever it holds.
//
// Names are slash-separated and relative to the root, as Git and fs.FS
// name files.
package confined

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// Root is a directory opened as a root: every file access through it stays
// inside the directory. Close releases it.
type Root struct {
	root *os.Root
}

// Open opens the directory dir as a Root.
func Open(dir string) (*Root, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	return &Root{root: root}, nil
}

// Close releases the directory.
func (r *Root) Close() error {
	return r.root.Close()
}

// FS returns the root as an fs.FS, for walking and reading.
func (r *Root) FS() fs.FS {
	return r.root.FS()
}

// WriteFile writes data to the file name with the permissions perm,
// creating the directories it lacks and replacing whatever name was before:
// a file, a symbolic link (never the file it points to) or a directory.
func (r *Root) WriteFile(name string, data []byte, perm fs.FileMode) error {
	if err := r.clear(name); err != nil {
		return err
	}
	return r.root.WriteFile(filepath.FromSlash(name), data, perm)
}

// Symlink makes name a symbolic link to target, creating the directories it
// lacks and replacing whatever name was before. The target is not checked:
// following the link through the root cannot leave it.
func (r *Root) Symlink(target, name string) error {
	if err := r.clear(name); err != nil {
		return err
	}
	return r.root.Symlink(target, filepath.FromSlash(name))
}

// clear makes the directory of name and removes what is at name.
func (r *Root) clear(name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := r.root.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
			return err
		}
	}
	return r.root.RemoveAll(filepath.FromSlash(name))
}

// Remove removes the file name, if it is there, and then the directories
// that its removal leaves empty, up to the root.
func (r *Root) Remove(name string) error {
	if err := r.root.Remove(filepath.FromSlash(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if r.root.Remove(filepath.FromSlash(dir)) != nil {
			break // not empty, or not there
		}
	}
	return nil
}

// RemoveAll removes name and, when it is a directory, everything in it. A
// symbolic link is removed, never what it points to.
func (r *Root) RemoveAll(name string) error {
	return r.root.RemoveAll(filepath.FromSlash(name))
}

// Lstat describes the file name; a symbolic link is described itself.
func (r *Root) Lstat(name string) (fs.FileInfo, error) {
	return r.root.Lstat(filepath.FromSlash(name))
}

// ReadFile returns the content of the file name.
func (r *Root) ReadFile(name string) ([]byte, error) {
	return r.root.ReadFile(filepath.FromSlash(name))
}

// Readlink returns the target of the symbolic link name.
func (r *Root) Readlink(name string) (string, error) {
	return r.root.Readlink(filepath.FromSlash(name))
}

// ReadDir returns the entries of the directory name, sorted by name.
func (r *Root) ReadDir(name string) ([]fs.DirEntry, error) {
	return fs.ReadDir(r.root.FS(), name)
}
