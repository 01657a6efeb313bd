package update

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/uprev-dev/uprev/internal/confined"
)

// ErrPathEscapesRoot is returned for an update path that leads outside the
// checkout, such as ../other, an absolute path or a symbolic link out, or
// into its .git directory.
var ErrPathEscapesRoot = errors.New("update path escapes the checkout root")

// Options configures a run of RewriteMarkers.
type Options struct {
	// Policies maps each policy the run may write to its latest reference.
	// Markers of other policies are left alone and listed as Unresolved.
	// A ReleaseSource's reference carries its version as Tag.
	Policies map[PolicyKey]Ref
	// Assets are the URLs and hashes of the assets of the ReleaseSources
	// in Policies, which their :url: and :sha256: markers write.
	Assets map[AssetKey]string
	// DefaultNamespace is the namespace of markers that name a policy
	// without one ({"$imagepolicy": "agent"}). When empty, such markers are
	// reported as invalid (Flux ignores them silently). A value with one
	// colon is always namespace:name, as in Flux.
	DefaultNamespace string
	// Guard is asked about every change; nil allows all of them.
	Guard Guard
	// DryRun computes the result without writing any file.
	DryRun bool
	// Only, when not nil, lists the files under dir, relative to it and
	// slash-separated, that may hold a marker token (MarkerTokens), as an index of the
	// checkout knows them (gitrepo.Session.FilesContaining): only those are
	// read, in walk order, and no other. It must list every such file and
	// leave out symbolic links; nil, the default, walks the whole tree.
	Only []string
	// Scans, when not nil, keeps what the run finds in each file's content
	// for later runs, which then parse only contents they have not seen:
	// an automation passes the same cache to each of its runs.
	Scans *ScanCache
}

// RewriteMarkers rewrites the marked values in the YAML files (.yaml, .yml,
// and files named Kustomization) under dir, a directory given relative to
// the checkout root. Only files containing MarkerToken or SourceMarkerToken are parsed, and only
// files in which a value changed are written, atomically (temporary file
// and rename, mode kept). A symbolic link with such a name is followed to
// the file it leads to only when that file is under dir too (Flux follows
// any link); the file is rewritten, and reported, under its own name, and
// the link stays a link. .git directories are skipped; nothing outside dir
// is ever read or written through a link, nor anything outside root.
//
// A file that cannot be read or parsed, or that holds an invalid marker, is
// reported in Result.FileErrors and left untouched; the run goes on. The
// error is non-nil only when the run could not go on: dir escapes root
// or leads into its .git directory (ErrPathEscapesRoot), root or dir cannot be opened, ctx is done, or a file
// could not be written. Files written before such an error stay written;
// the Result then lists the changes made so far.
func RewriteMarkers(ctx context.Context, root, dir string, opts Options) (Result, error) {
	if dir == "" {
		dir = "."
	}
	if !filepath.IsLocal(dir) {
		return Result{}, fmt.Errorf("%w: %q", ErrPathEscapesRoot, dir)
	}
	dir = filepath.ToSlash(filepath.Clean(dir))
	checkout, err := confined.Open(root)
	if err != nil {
		return Result{}, fmt.Errorf("opening checkout %s: %w", root, err)
	}
	defer func() { _ = checkout.Close() }() // directory handles: each write is checked where made
	tree, err := checkout.OpenWorkDir(dir, false)
	if err != nil {
		if errors.Is(err, confined.ErrEscapes) || errors.Is(err, confined.ErrGitDir) {
			return Result{}, fmt.Errorf("%w: %s: %w", ErrPathEscapesRoot, dir, err)
		}
		return Result{}, fmt.Errorf("opening update path %s: %w", dir, err)
	}
	defer func() { _ = tree.Close() }()

	rw := &rewriter{policies: opts.Policies, assets: opts.Assets, defaultNamespace: opts.DefaultNamespace, guard: opts.Guard, scans: opts.Scans}
	files := &treeFiles{tree: tree}
	defer files.closeDir()
	var res Result
	visit := func(name string, d fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		file := path.Join(dir, name)
		switch {
		case err != nil:
			res.FileErrors = append(res.FileErrors, &FileError{File: file, Err: err})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		case d.IsDir() && d.Name() == ".git":
			return fs.SkipDir
		case !isYAMLName(name):
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			// A link is followed to its file when that file is inside the
			// tree; the file is then read, rewritten and reported under
			// its own name, once, however many links lead to it.
			target, ok := files.linkTarget(name)
			if !ok {
				return nil
			}
			name, file = target, path.Join(dir, target)
		case !d.Type().IsRegular():
			return nil
		}
		src, err := files.read(name)
		if err != nil {
			res.FileErrors = append(res.FileErrors, &FileError{File: file, Err: fmt.Errorf("reading: %w", err)})
			return nil
		}
		if !mentionsMarker(src) || !files.firstVisit(name) {
			return nil
		}
		fr := rw.rewriteFile(file, src)
		if fr.out != nil && !opts.DryRun {
			if err := files.write(name, fr.out); err != nil {
				return fmt.Errorf("writing %s: %w", file, err)
			}
		}
		res.Changes = append(res.Changes, fr.changes...)
		res.Refused = append(res.Refused, fr.refused...)
		res.Unresolved = append(res.Unresolved, fr.unresolved...)
		res.FileErrors = append(res.FileErrors, fr.errs...)
		return nil
	}
	if opts.Only != nil {
		err = visitListed(tree, opts.Only, visit)
	} else {
		err = fs.WalkDir(tree.FS(), ".", visit)
	}
	if err != nil {
		return res, fmt.Errorf("rewriting markers under %s: %w", dir, err)
	}
	return res, nil
}

// visitListed calls visit for each of the files names of tree, in the
// order fs.WalkDir would reach them, as fs.WalkDir would call it.
func visitListed(tree *confined.Root, names []string, visit fs.WalkDirFunc) error {
	sorted := slices.Clone(names)
	slices.SortFunc(sorted, walkOrder)
	for _, name := range sorted {
		info, err := tree.Lstat(name)
		var d fs.DirEntry
		if err == nil {
			d = fs.FileInfoToDirEntry(info)
		}
		if err := visit(name, d, err); err != nil {
			return err
		}
	}
	return nil
}

// walkOrder compares slash-separated paths in the order of a walk that
// reads each directory's names sorted: by their first differing element.
func walkOrder(a, b string) int {
	return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
}

// isYAMLName reports whether a file is read as YAML: it has a YAML
// extension or, as kustomize's own file name and as Flux reads it, is
// named exactly Kustomization.
func isYAMLName(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return ext == ".yaml" || ext == ".yml" || path.Base(name) == "Kustomization"
}

// treeFiles reads and writes the files of a tree in walk order. It keeps the
// directory of the last file open, so that reading a file costs one open
// rather than one per path component, and reuses one read buffer.
type treeFiles struct {
	tree    *confined.Root
	dirName string
	dir     *confined.Root
	buf     bytes.Buffer
	// marked is the names of the files with a marker read so far, so that
	// a file reached both directly and through a link is rewritten once.
	marked map[string]bool
}

// firstVisit records that the file name, which holds a marker, is being
// rewritten, and reports whether it was not before.
func (t *treeFiles) firstVisit(name string) bool {
	if t.marked[name] {
		return false
	}
	if t.marked == nil {
		t.marked = map[string]bool{}
	}
	t.marked[name] = true
	return true
}

// linkTarget returns the name, in the tree, of the regular file that the
// symbolic link name leads to, through any chain of links. It reports
// false for a link that is broken, leads out of the tree or into a .git
// directory, or leads to anything but a regular file.
func (t *treeFiles) linkTarget(name string) (string, bool) {
	target, info, err := t.tree.Resolve(name)
	if err != nil || !info.Mode().IsRegular() || confined.InGitDir(target) {
		return "", false
	}
	return target, true
}

// enterDir makes the directory holding name the open one.
func (t *treeFiles) enterDir(name string) error {
	dirName := path.Dir(name)
	if t.dir != nil && t.dirName == dirName {
		return nil
	}
	t.closeDir()
	dir, err := t.tree.OpenRoot(dirName)
	if err != nil {
		return fmt.Errorf("opening directory: %w", err)
	}
	t.dir, t.dirName = dir, dirName
	return nil
}

// closeDir closes the open directory, if any. The directory was only read
// through, so an error closing it loses nothing.
func (t *treeFiles) closeDir() {
	if t.dir != nil {
		_ = t.dir.Close()
		t.dir = nil
	}
}

// read returns the content of the file name; it is valid until the next
// read.
func (t *treeFiles) read(name string) ([]byte, error) {
	if err := t.enterDir(name); err != nil {
		return nil, err
	}
	f, err := t.dir.Open(path.Base(name))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	t.buf.Reset()
	if _, err := t.buf.ReadFrom(f); err != nil {
		return nil, err
	}
	return t.buf.Bytes(), nil
}

// write replaces the file name by data atomically, keeping the file's
// permission bits.
func (t *treeFiles) write(name string, data []byte) error {
	if err := t.enterDir(name); err != nil {
		return err
	}
	info, err := t.dir.Lstat(path.Base(name))
	if err != nil {
		return fmt.Errorf("reading file mode: %w", err)
	}
	if err := t.dir.ReplaceFile(path.Base(name), data, info.Mode().Perm()); err != nil {
		return fmt.Errorf("replacing file: %w", err)
	}
	return nil
}
