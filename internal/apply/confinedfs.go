package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// errReadOnly is returned by every write to a confinedFS.
var errReadOnly = errors.New("the build file system is read-only")

// confinedFS is the read-only kustomize file system of a build: every read
// goes through the checkout's root, and every kustomize configuration it
// hands out (a kustomization, a builtin generator's or transformer's
// configuration) is first checked for remote locations, which kustomize
// would fetch itself instead of reading them from here.
type confinedFS struct {
	checkout *checkout
	check    configCheck
	// refused is the first configuration refused for naming a remote
	// location: kustomize reports an unreadable kustomization file as
	// missing, so the build reports this instead.
	refused error
}

var _ filesys.FileSystem = &confinedFS{}

// newConfinedFS returns the kustomize file system of c.
func newConfinedFS(c *checkout) *confinedFS {
	return &confinedFS{checkout: c, check: configCheck{resources: provider.NewDepProvider().GetResourceFactory()}}
}

// Create refuses to write.
func (c *confinedFS) Create(path string) (filesys.File, error) { return nil, errReadOnly }

// Mkdir refuses to write.
func (c *confinedFS) Mkdir(path string) error { return errReadOnly }

// MkdirAll refuses to write.
func (c *confinedFS) MkdirAll(path string) error { return errReadOnly }

// RemoveAll refuses to write.
func (c *confinedFS) RemoveAll(path string) error { return errReadOnly }

// WriteFile refuses to write.
func (c *confinedFS) WriteFile(path string, data []byte) error { return errReadOnly }

// Open opens a file of the checkout.
func (c *confinedFS) Open(path string) (filesys.File, error) {
	name, err := c.checkout.name(path)
	if err != nil {
		return nil, err
	}
	return c.checkout.root.Open(filepath.ToSlash(name))
}

// IsDir tells whether path is a directory of the checkout.
func (c *confinedFS) IsDir(path string) bool {
	info, err := c.stat(path)
	return err == nil && info.IsDir()
}

// ReadDir lists a directory of the checkout.
func (c *confinedFS) ReadDir(path string) ([]string, error) {
	name, err := c.checkout.name(path)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(c.checkout.root.FS(), filepath.ToSlash(name))
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", name, err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// CleanedAbs resolves path, which must lead to a file or directory of the
// checkout: a directory is returned as is, a file as its directory and
// name, both with symbolic links resolved.
func (c *confinedFS) CleanedAbs(path string) (filesys.ConfirmedDir, string, error) {
	name, err := c.checkout.name(path)
	if err != nil {
		return "", "", err
	}
	resolved, info, err := c.checkout.resolve(name)
	if err != nil {
		return "", "", err
	}
	if info.IsDir() {
		return filesys.ConfirmedDir(c.checkout.abs(resolved)), "", nil
	}
	return filesys.ConfirmedDir(c.checkout.abs(filepath.Dir(resolved))), filepath.Base(resolved), nil
}

// Exists tells whether path exists in the checkout.
func (c *confinedFS) Exists(path string) bool {
	_, err := c.stat(path)
	return err == nil
}

// Glob returns the files of the checkout that match pattern.
func (c *confinedFS) Glob(pattern string) ([]string, error) {
	name, err := c.checkout.name(pattern)
	if err != nil {
		return nil, err
	}
	matches, err := fs.Glob(c.checkout.root.FS(), filepath.ToSlash(name))
	if err != nil {
		return nil, fmt.Errorf("matching %s: %w", name, err)
	}
	for i, m := range matches {
		matches[i] = c.checkout.abs(filepath.FromSlash(m))
	}
	return matches, nil
}

// ReadFile reads a file of the checkout. A kustomize configuration that
// names a remote location is refused here, before kustomize would fetch it.
func (c *confinedFS) ReadFile(path string) ([]byte, error) {
	name, err := c.checkout.name(path)
	if err != nil {
		return nil, err
	}
	data, err := c.checkout.readFile(name)
	if err != nil {
		return nil, err
	}
	check := c.check.pluginConfigs
	if slices.Contains(konfig.RecognizedKustomizationFileNames(), filepath.Base(name)) {
		check = c.check.kustomization
	}
	if err := check(data); err != nil {
		err = fmt.Errorf("%s: %w", filepath.ToSlash(name), err)
		if c.refused == nil {
			c.refused = err
		}
		return nil, err
	}
	return data, nil
}

// Walk walks a tree of the checkout; links to directories are not entered.
func (c *confinedFS) Walk(path string, walkFn filepath.WalkFunc) error {
	name, err := c.checkout.name(path)
	if err != nil {
		return err
	}
	return fs.WalkDir(c.checkout.root.FS(), filepath.ToSlash(name), func(p string, d fs.DirEntry, err error) error {
		abs := c.checkout.abs(filepath.FromSlash(p))
		if err != nil {
			return walkFn(abs, nil, err)
		}
		info, err := d.Info()
		return walkFn(abs, info, err)
	})
}

// stat describes the file path of the checkout, following links.
func (c *confinedFS) stat(path string) (os.FileInfo, error) {
	name, err := c.checkout.name(path)
	if err != nil {
		return nil, err
	}
	return c.checkout.root.Stat(filepath.ToSlash(name))
}
