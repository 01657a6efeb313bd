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
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// ErrEscapes marks a name that leads out of the root: through `..`, as an
// absolute name, or through a symbolic link that points outside.
var ErrEscapes = errors.New("leads out of the directory")

// ErrGitDir marks a name that is, or leads through symbolic links into, a
// .git directory.
var ErrGitDir = errors.New("is inside a .git directory")

// InGitDir reports whether the slash-separated name is a .git directory or
// lies inside one, at any depth: Git's own files, which no file written
// for a user's change may touch.
func InGitDir(name string) bool {
	return slices.Contains(strings.Split(path.Clean(name), "/"), ".git")
}

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

// OpenRoot opens the directory name as a Root of its own, confined to that
// directory. A name that leads out of r is an error marked ErrEscapes.
func (r *Root) OpenRoot(name string) (*Root, error) {
	sub, err := r.root.OpenRoot(filepath.FromSlash(name))
	if err != nil {
		return nil, r.escapes(name, err)
	}
	return &Root{root: sub}, nil
}

// OpenWorkDir opens the directory name of a Git working tree as a Root of
// its own, for writing a user's files there, and with create makes the
// directories it lacks first. A name inside a .git directory, or whose
// existing part leads into one through symbolic links, is an error marked
// ErrGitDir; one that leads out of r, marked ErrEscapes. Both are refused
// before any directory is made.
func (r *Root) OpenWorkDir(name string, create bool) (*Root, error) {
	if InGitDir(name) {
		return nil, fmt.Errorf("%s %w", name, ErrGitDir)
	}
	for d := path.Clean(name); ; d = path.Dir(d) {
		resolved, _, err := r.Resolve(d)
		if err == nil {
			if InGitDir(resolved) {
				return nil, fmt.Errorf("%s %w", name, ErrGitDir)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || d == "." {
			return nil, err
		}
	}
	if create {
		if err := r.MkdirAll(name, 0o755); err != nil {
			return nil, err
		}
	}
	return r.OpenRoot(name)
}

// MkdirAll makes the directory name and the directories it lacks, with the
// permissions perm. A name that leads out of r is an error marked
// ErrEscapes.
func (r *Root) MkdirAll(name string, perm fs.FileMode) error {
	if err := r.root.MkdirAll(filepath.FromSlash(name), perm); err != nil {
		return r.escapes(name, err)
	}
	return nil
}

// escapes marks err, the failure of an access to name, with ErrEscapes when
// name is not local or when a part of it that exists resolves through
// symbolic links to a place outside r, as os.Root refuses (without an error
// that can be tested for).
func (r *Root) escapes(name string, err error) error {
	local := filepath.FromSlash(name)
	if !filepath.IsLocal(local) && filepath.Clean(local) != "." {
		return fmt.Errorf("%s %w: %w", name, ErrEscapes, err)
	}
	base, baseErr := filepath.EvalSymlinks(r.root.Name())
	if baseErr != nil {
		return err
	}
	prefix := base
	for _, part := range strings.Split(filepath.ToSlash(filepath.Clean(local)), "/") {
		prefix = filepath.Join(prefix, part)
		resolved, partErr := filepath.EvalSymlinks(prefix)
		if partErr != nil {
			return err
		}
		if rel, relErr := filepath.Rel(base, resolved); relErr != nil || !filepath.IsLocal(rel) && rel != "." {
			return fmt.Errorf("%s %w: %w", name, ErrEscapes, err)
		}
	}
	return err
}

// Resolve returns the name, relative to r, of the file or directory that
// name leads to once its symbolic links are followed, and what it is. A
// name that leads out of r is an error marked ErrEscapes; one that does
// not exist, an error marked fs.ErrNotExist.
func (r *Root) Resolve(name string) (string, fs.FileInfo, error) {
	// The root follows links only while they stay inside it.
	info, err := r.root.Stat(filepath.FromSlash(name))
	if err != nil {
		return "", nil, r.escapes(name, err)
	}
	base, err := filepath.EvalSymlinks(r.root.Name())
	if err != nil {
		return "", nil, fmt.Errorf("resolving %s: %w", name, err)
	}
	resolved, err := filepath.EvalSymlinks(filepath.Join(base, filepath.FromSlash(name)))
	if err != nil {
		return "", nil, fmt.Errorf("resolving %s: %w", name, err)
	}
	rel, err := filepath.Rel(base, resolved)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", nil, fmt.Errorf("%s %w", name, ErrEscapes)
	}
	return filepath.ToSlash(rel), info, nil
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

// ReplaceFile replaces the file name by data, atomically: data is written
// to a temporary file next to it (WriteTemp), which is then renamed over
// name. Whoever reads name sees the old content or the new, never a part.
func (r *Root) ReplaceFile(name string, data []byte, perm fs.FileMode) error {
	temp, err := r.WriteTemp(name, data, perm)
	if err != nil {
		return err
	}
	if err := r.Rename(temp, name); err != nil {
		return errors.Join(fmt.Errorf("replacing %s: %w", name, err), r.root.Remove(filepath.FromSlash(temp)))
	}
	return nil
}

// WriteTemp writes data to a new temporary file in the directory of name,
// with exactly the permissions perm (whatever the umask), and returns the
// temporary file's name. Renaming it over name (Rename) replaces name at
// once; removing it (Remove) abandons the write.
func (r *Root) WriteTemp(name string, data []byte, perm fs.FileMode) (string, error) {
	dir, base := path.Split(name)
	for range 10 {
		temp := dir + "." + base + ".uprev-" + rand.Text()
		f, err := r.root.OpenFile(filepath.FromSlash(temp), os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("creating a temporary file for %s: %w", name, err)
		}
		_, err = f.Write(data)
		if err == nil {
			// OpenFile's permissions are masked by the umask.
			err = f.Chmod(perm)
		}
		if closeErr := f.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			_ = r.root.Remove(filepath.FromSlash(temp))
			return "", fmt.Errorf("writing %s: %w", name, err)
		}
		return temp, nil
	}
	return "", fmt.Errorf("creating a temporary file for %s: %w", name, fs.ErrExist)
}

// Rename renames the file oldname to newname, replacing what newname was:
// a symbolic link is replaced, never the file it points to.
func (r *Root) Rename(oldname, newname string) error {
	return r.root.Rename(filepath.FromSlash(oldname), filepath.FromSlash(newname))
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

// Stat describes the file name, following symbolic links while they stay
// inside the root.
func (r *Root) Stat(name string) (fs.FileInfo, error) {
	return r.root.Stat(filepath.FromSlash(name))
}

// Open opens the file name for reading, following symbolic links while
// they stay inside the root.
func (r *Root) Open(name string) (*os.File, error) {
	return r.root.Open(filepath.FromSlash(name))
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
