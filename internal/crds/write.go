package crds

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/uprev-dev/uprev/internal/confined"
)

// WriteOptions configure Write.
type WriteOptions struct {
	// Prune deletes the files of CRDs that the bundle no longer has. Off,
	// they are kept and only reported in Result.Removed.
	Prune bool
	// Version is the version of the artifact the bundle came from (the
	// policy's new tag): the version reported for a CRD without an
	// app.kubernetes.io/version label.
	Version string
	// PreviousVersion is the version the directory was written from (the
	// tag being replaced): the old version reported for a CRD file without
	// the label.
	PreviousVersion string
	// DryRun computes the Result without writing or deleting anything.
	DryRun bool
}

// Change is what happened to one CRD.
type Change struct {
	// Name is the CRD's name, <plural>.<group>.
	Name string
	// File is its file, relative to the checkout root.
	File string
	// OldVersion is the version of the file before, when known.
	OldVersion string
	// NewVersion is the version written, when known.
	NewVersion string
	// OldManifest is the file's content before an update (Updated only),
	// to compare the CRD's versions with the new one's.
	OldManifest []byte
}

// Result is what Write did, each list sorted by name.
type Result struct {
	// Added are the CRDs that had no file before.
	Added []Change
	// Updated are the CRDs whose file changed.
	Updated []Change
	// Unchanged are the CRDs whose file already had the bytes to write.
	Unchanged []Change
	// Removed are the CRD files whose CRD the bundle no longer has. They
	// were deleted if Pruned, kept otherwise.
	Removed []Change
	// Pruned says the Removed files were deleted.
	Pruned bool
	// Ignored is Bundle.Ignored: the number of documents of the artifact
	// that are not CRDs, left out.
	Ignored int
	// IgnoredKinds is Bundle.IgnoredKinds: those documents by
	// "<apiVersion> <kind>".
	IgnoredKinds map[string]int
}

// Changed reports whether Write changed a file (or would have, in a dry
// run).
func (r Result) Changed() bool {
	return len(r.Added) > 0 || len(r.Updated) > 0 || (r.Pruned && len(r.Removed) > 0)
}

// Summary describes the changes in one line for a commit message, such as
// "crds: agents.example.com 1.4.1 --> 1.4.2, new: policies.example.com";
// it is empty when Write changed nothing and nothing was removed.
func (r Result) Summary() string {
	var parts []string
	for _, c := range r.Updated {
		switch {
		case c.OldVersion != "" && c.NewVersion != "" && c.OldVersion != c.NewVersion:
			parts = append(parts, c.Name+" "+c.OldVersion+" --> "+c.NewVersion)
		case c.NewVersion != "":
			parts = append(parts, c.Name+" updated at "+c.NewVersion)
		default:
			parts = append(parts, c.Name+" updated")
		}
	}
	if len(r.Added) > 0 {
		parts = append(parts, "new: "+joinNames(r.Added))
	}
	if len(r.Removed) > 0 {
		if r.Pruned {
			parts = append(parts, "pruned: "+joinNames(r.Removed))
		} else {
			parts = append(parts, "no longer shipped (kept): "+joinNames(r.Removed))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "crds: " + strings.Join(parts, ", ")
}

func joinNames(changes []Change) string {
	names := make([]string, len(changes))
	for i, c := range changes {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// Write writes the CRDs of bundle into dir, a directory given relative to
// the checkout root (made if missing), one <name>.yaml file per CRD, and
// returns what changed. Only files whose bytes differ are written; a second
// Write of the same bundle changes nothing. CRD files already in dir (a
// <name>.yaml holding the CRD called name) that the bundle lacks are
// reported in Result.Removed and deleted only with opts.Prune; other files,
// such as a kustomization.yaml, are left alone.
//
// Files are first all written to temporary files next to their
// destination, then renamed over it, so that a file is never seen half
// written and a failure while writing (a full disk) leaves every file as it
// was; only a failing rename, within one folder, could leave part done. The
// mode of a replaced file is kept. Nothing outside root is read or
// written, nor inside its .git directory: a dir that leads out, or into
// .git, by name or through a symbolic link, gives ErrPathEscapesRoot
// (confined.Root.OpenWorkDir holds the rule).
//
// bundle comes from Extract, which refuses a hostile artifact before
// anything is written.
func Write(root, dir string, bundle *Bundle, opts WriteOptions) (Result, error) {
	if bundle == nil {
		return Result{}, fmt.Errorf("writing CRDs to %s: no bundle", dir)
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
	existing := map[string]existingFile{}
	folder, err := checkout.OpenWorkDir(dir, !opts.DryRun)
	switch {
	case err == nil:
		defer func() { _ = folder.Close() }()
		if existing, err = readExisting(folder); err != nil {
			return Result{}, fmt.Errorf("reading CRD folder %s: %w", dir, err)
		}
	case opts.DryRun && errors.Is(err, fs.ErrNotExist):
	default:
		return Result{}, fmt.Errorf("opening CRD folder %s: %w", dir, escapeError(dir, err))
	}

	res := Result{Ignored: bundle.Ignored, IgnoredKinds: bundle.IgnoredKinds, Pruned: opts.Prune}
	var writes []fileWrite
	for _, crd := range bundle.CRDs {
		change := Change{Name: crd.Name, File: path.Join(dir, crd.Name+".yaml"), NewVersion: cmp.Or(crd.Version, opts.Version)}
		old, ok := existing[crd.Name]
		delete(existing, crd.Name)
		switch {
		case !ok:
			res.Added = append(res.Added, change)
			writes = append(writes, fileWrite{name: crd.Name + ".yaml", data: crd.Manifest, mode: 0o644})
		case bytes.Equal(old.data, crd.Manifest):
			change.OldVersion = cmp.Or(old.version, opts.PreviousVersion)
			res.Unchanged = append(res.Unchanged, change)
		default:
			change.OldVersion = cmp.Or(old.version, opts.PreviousVersion)
			change.OldManifest = old.data
			res.Updated = append(res.Updated, change)
			writes = append(writes, fileWrite{name: crd.Name + ".yaml", data: crd.Manifest, mode: old.mode})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(existing)) {
		res.Removed = append(res.Removed, Change{Name: name, File: path.Join(dir, name+".yaml"), OldVersion: cmp.Or(existing[name].version, opts.PreviousVersion)})
	}
	if opts.DryRun {
		return res, nil
	}
	if err := writeAll(folder, writes); err != nil {
		return Result{}, fmt.Errorf("writing CRDs to %s: %w", dir, err)
	}
	if opts.Prune {
		for _, c := range res.Removed {
			if err := folder.Remove(c.Name + ".yaml"); err != nil {
				return res, fmt.Errorf("pruning %s: %w", c.File, err)
			}
		}
	}
	return res, nil
}

// existingFile is a CRD file found in the folder.
type existingFile struct {
	data    []byte
	version string
	mode    fs.FileMode
}

// readExisting returns the CRD files of folder by CRD name: the regular
// <name>.yaml files that hold one CRD called name. Subfolders are not read.
func readExisting(folder *confined.Root) (map[string]existingFile, error) {
	entries, err := folder.ReadDir(".")
	if err != nil {
		return nil, err
	}
	found := map[string]existingFile{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".yaml")
		if !ok || !e.Type().IsRegular() || !safeName.MatchString(name) {
			continue
		}
		data, err := folder.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		docs, err := splitDocuments(data)
		if err != nil || len(docs) != 1 {
			continue
		}
		crd, _, err := parseDocument(docs[0])
		if err != nil || crd == nil || crd.Name != name {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		found[name] = existingFile{data: data, version: crd.Version, mode: info.Mode().Perm()}
	}
	return found, nil
}

// fileWrite is a file to write: its name in the folder, data and mode.
type fileWrite struct {
	name string
	data []byte
	mode fs.FileMode
}

// writeAll writes every file to a temporary file, and renames them into
// place only once all were written.
func writeAll(folder *confined.Root, writes []fileWrite) error {
	temps := make([]string, 0, len(writes))
	cleanup := func() {
		for _, t := range temps {
			_ = folder.Remove(t)
		}
	}
	for _, w := range writes {
		temp, err := folder.WriteTemp(w.name, w.data, w.mode)
		if err != nil {
			cleanup()
			return err
		}
		temps = append(temps, temp)
	}
	for i, w := range writes {
		if err := folder.Rename(temps[i], w.name); err != nil {
			cleanup()
			return fmt.Errorf("renaming %s: %w", temps[i], err)
		}
	}
	return nil
}

// escapeError marks err, the failure to make or open the CRD folder dir,
// with ErrPathEscapesRoot when dir leads out of the checkout or into its
// .git directory.
func escapeError(dir string, err error) error {
	if errors.Is(err, confined.ErrEscapes) || errors.Is(err, confined.ErrGitDir) {
		return fmt.Errorf("%w: %s: %w", ErrPathEscapesRoot, dir, err)
	}
	return err
}
