package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/uprev-dev/uprev/internal/confined"
)

// checkout is the directory a build reads, opened as a confined.Root: every read
// of a build (the Sync path, plain YAML files, every file kustomize loads)
// goes through it, so no name — a `..`, a symbolic link, absolute or
// relative, at any depth — reaches a file outside the directory.
type checkout struct {
	// dir is the directory's absolute path with symbolic links resolved:
	// kustomize speaks in such paths.
	dir  string
	root *confined.Root
}

// openCheckout opens dir as a checkout. The directory itself is trusted
// (the clone's own location); only what is inside it is confined.
func openCheckout(dir string) (*checkout, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	root, err := confined.Open(real)
	if err != nil {
		return nil, err
	}
	return &checkout{dir: real, root: root}, nil
}

// Close releases the checkout's directory handle.
func (c *checkout) Close() error { return c.root.Close() }

// name returns the name inside the checkout of path, which is absolute (as
// kustomize gives it) or relative to the checkout. It only maps the path;
// the checkout's root judges where the name leads when it is opened.
func (c *checkout) name(path string) (string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.dir, path)
	}
	rel, err := filepath.Rel(c.dir, filepath.Clean(path))
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", fmt.Errorf("%s is outside the checkout", path)
	}
	return rel, nil
}

// abs returns the absolute path of name.
func (c *checkout) abs(name string) string { return filepath.Join(c.dir, name) }

// resolve returns name with its symbolic links resolved, and what it is.
// A name that leads out of the checkout, through `..` or a link, or does
// not exist, is an error.
func (c *checkout) resolve(name string) (string, fs.FileInfo, error) {
	// The root's resolved name is the file's real location, what kustomize
	// compares bases and cycles by.
	resolved, info, err := c.root.Resolve(filepath.ToSlash(name))
	if err != nil {
		return "", nil, err
	}
	return filepath.FromSlash(resolved), info, nil
}

// readFile reads the file name.
func (c *checkout) readFile(name string) ([]byte, error) {
	return c.root.ReadFile(filepath.ToSlash(name))
}

// syncPath returns the resolved name of a Sync's path, a directory of the
// checkout: a leading slash means the checkout's top, as in Flux.
func (c *checkout) syncPath(path string) (string, error) {
	name := strings.TrimLeft(filepath.ToSlash(path), "/")
	if name == "" {
		name = "."
	}
	name = filepath.FromSlash(name)
	if !filepath.IsLocal(name) && filepath.Clean(name) != "." {
		return "", errors.New("the path leaves the checkout")
	}
	resolved, info, err := c.resolve(name)
	if err != nil {
		return "", fmt.Errorf("not a directory of the checkout: %w", err)
	}
	if !info.IsDir() {
		return "", errors.New("not a directory")
	}
	return resolved, nil
}
