package apply

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// errReadOnly is returned by every write to a confinedFS.
var errReadOnly = errors.New("the build file system is read-only")

// confinedFS is a read-only kustomize file system that refuses any path
// outside root, after resolving symbolic links, and refuses kustomizations
// that name remote resources before kustomize tries to fetch them.
type confinedFS struct {
	root string
	disk filesys.FileSystem
	// refused is the first kustomization refused for naming a remote
	// resource: kustomize reports an unreadable kustomization file as
	// missing, so the build reports this instead.
	refused error
}

var _ filesys.FileSystem = &confinedFS{}

// newConfinedFS returns a confinedFS for root, which must be absolute with
// symbolic links resolved.
func newConfinedFS(root string) *confinedFS {
	return &confinedFS{root: root, disk: filesys.MakeFsOnDisk()}
}

// check returns an error unless path, with symbolic links resolved as far
// as the path exists, lies under the root.
func (c *confinedFS) check(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", path, err)
	}
	resolved := abs
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		resolved = real
	}
	if !within(c.root, resolved) {
		return fmt.Errorf("%s is outside the build root %s", path, c.root)
	}
	return nil
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

// Open opens a file under the root.
func (c *confinedFS) Open(path string) (filesys.File, error) {
	if err := c.check(path); err != nil {
		return nil, err
	}
	f, err := c.disk.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return f, nil
}

// IsDir tells whether path is a directory under the root.
func (c *confinedFS) IsDir(path string) bool {
	return c.check(path) == nil && c.disk.IsDir(path)
}

// ReadDir lists a directory under the root.
func (c *confinedFS) ReadDir(path string) ([]string, error) {
	if err := c.check(path); err != nil {
		return nil, err
	}
	names, err := c.disk.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", path, err)
	}
	return names, nil
}

// CleanedAbs resolves path, which must lie under the root.
func (c *confinedFS) CleanedAbs(path string) (filesys.ConfirmedDir, string, error) {
	if err := c.check(path); err != nil {
		return "", "", err
	}
	dir, file, err := c.disk.CleanedAbs(path)
	if err != nil {
		return "", "", fmt.Errorf("resolving %s: %w", path, err)
	}
	return dir, file, nil
}

// Exists tells whether path exists under the root.
func (c *confinedFS) Exists(path string) bool {
	return c.check(path) == nil && c.disk.Exists(path)
}

// Glob returns the matches of pattern that lie under the root.
func (c *confinedFS) Glob(pattern string) ([]string, error) {
	matches, err := c.disk.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("matching %s: %w", pattern, err)
	}
	return slices.DeleteFunc(matches, func(m string) bool { return c.check(m) != nil }), nil
}

// ReadFile reads a file under the root. A kustomization that names a remote
// resource is refused here, before kustomize would fetch it.
func (c *confinedFS) ReadFile(path string) ([]byte, error) {
	if err := c.check(path); err != nil {
		return nil, err
	}
	data, err := c.disk.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if slices.Contains(konfig.RecognizedKustomizationFileNames(), filepath.Base(path)) {
		if err := refuseRemote(data); err != nil {
			err = fmt.Errorf("%s: %w", path, err)
			if c.refused == nil {
				c.refused = err
			}
			return nil, err
		}
	}
	return data, nil
}

// Walk walks a tree under the root.
func (c *confinedFS) Walk(path string, walkFn filepath.WalkFunc) error {
	if err := c.check(path); err != nil {
		return err
	}
	return c.disk.Walk(path, walkFn)
}

// refuseRemote returns an error when a kustomization lists a remote
// resource, component or base. A kustomization it cannot parse is left to
// kustomize to report.
func refuseRemote(kustomization []byte) error {
	var k types.Kustomization
	if err := yaml.Unmarshal(kustomization, &k); err != nil {
		return nil
	}
	for _, list := range [][]string{k.Resources, k.Components, k.Bases} {
		for _, entry := range list {
			if isRemote(entry) {
				return fmt.Errorf("remote resource %q is not allowed", entry)
			}
		}
	}
	return nil
}

// isRemote tells whether a kustomization entry is a URL or a Git reference
// rather than a local path.
func isRemote(entry string) bool {
	for _, marker := range []string{"://", "?ref=", "?version=", "git@", "github.com/", "gitlab.com/", "bitbucket.org/"} {
		if strings.Contains(entry, marker) {
			return true
		}
	}
	return false
}
