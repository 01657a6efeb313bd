package apply

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
)

// Build returns the objects described by dir, confined to dir: the kustomize
// build of dir when it holds a kustomization (kustomization.yaml,
// kustomization.yml or Kustomization), otherwise every object in every
// .yaml/.yml file under dir, recursively, in file order. See BuildWithin.
func Build(dir string) ([]*unstructured.Unstructured, error) {
	return BuildWithin(dir, ".")
}

// BuildWithin is Build for the directory path inside root (typically a Git
// checkout; a leading slash means root itself). Every read of the build —
// the path, plain YAML files, every file kustomize loads, wherever a
// kustomization points (bases may be anywhere under root, such as
// ../../base) — goes through one os.Root of root: a `..` or a symbolic
// link that leads out of root is an error naming it, as is a path that does
// not exist, never an empty build. Kustomize fetches nothing: a remote
// location in any field of a kustomization, and kustomize plugins, are
// refused.
//
// Plain YAML files may hold several documents; empty documents are skipped,
// as are directories whose name starts with a dot (.git, .github). An
// object without apiVersion, kind or name, invalid YAML, or the same object
// twice makes the whole build fail with a *BuildError naming the file
// (relative to root).
func BuildWithin(root, path string) ([]*unstructured.Unstructured, error) {
	c, err := openCheckout(root)
	if err != nil {
		return nil, &BuildError{Path: path, Err: err}
	}
	defer func() { _ = c.Close() }() // a directory handle: nothing written through it is lost
	dir, err := c.syncPath(path)
	if err != nil {
		return nil, &BuildError{Path: path, Err: err}
	}
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if _, err := c.root.Lstat(filepath.ToSlash(filepath.Join(dir, name))); err == nil {
			return buildKustomization(c, dir)
		}
	}
	return buildPlain(c, dir)
}

// buildKustomization runs krusty on the directory dir of c with plugins
// disabled, on a read-only file system confined to c.
func buildKustomization(c *checkout, dir string) ([]*unstructured.Unstructured, error) {
	opts := krusty.MakeDefaultOptions()
	fsys := newConfinedFS(c)
	resMap, err := krusty.MakeKustomizer(opts).Run(fsys, c.abs(dir))
	if fsys.refused != nil {
		return nil, &BuildError{Path: filepath.ToSlash(dir), Err: fsys.refused}
	}
	if err != nil {
		return nil, &BuildError{Path: filepath.ToSlash(dir), Err: fmt.Errorf("kustomize build: %w", err)}
	}
	objects := make([]*unstructured.Unstructured, 0, resMap.Size())
	for _, res := range resMap.Resources() {
		m, err := res.Map()
		if err != nil {
			return nil, &BuildError{Path: filepath.ToSlash(dir), Err: fmt.Errorf("converting %s: %w", res.CurId(), err)}
		}
		objects = append(objects, &unstructured.Unstructured{Object: m})
	}
	if err := checkObjects(objects); err != nil {
		return nil, &BuildError{Path: filepath.ToSlash(dir), Err: err}
	}
	return objects, nil
}

// buildPlain reads every YAML file under the directory dir of c. Links to
// files are read where they lead inside c; links to directories are not
// entered.
func buildPlain(c *checkout, dir string) ([]*unstructured.Unstructured, error) {
	var objects []*unstructured.Unstructured
	seen := map[object.ObjMetadata]string{}
	top := filepath.ToSlash(dir)
	err := fs.WalkDir(c.root.FS(), top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return &BuildError{Path: path, Err: err}
		}
		if d.IsDir() {
			if path != top && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		data, err := c.readFile(filepath.FromSlash(path))
		if err != nil {
			return &BuildError{Path: path, Err: fmt.Errorf("reading file: %w", err)}
		}
		docs, err := readYAML(data)
		if err != nil {
			return &BuildError{Path: path, Err: err}
		}
		for _, o := range docs {
			id := object.UnstructuredToObjMetadata(o)
			if prev, ok := seen[id]; ok {
				return &BuildError{Path: path, Err: fmt.Errorf("%s/%s is also defined in %s", o.GetKind(), o.GetName(), prev)}
			}
			seen[id] = path
		}
		objects = append(objects, docs...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return objects, nil
}

// readYAML decodes every non-empty document of a file, expanding Lists.
func readYAML(data []byte) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objects []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		var m map[string]any
		if err := utilyaml.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		docObjects := []*unstructured.Unstructured{u}
		if u.IsList() {
			docObjects = nil
			err := u.EachListItem(func(item runtime.Object) error {
				docObjects = append(docObjects, item.(*unstructured.Unstructured))
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
		}
		if err := checkObjects(docObjects); err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		objects = append(objects, docObjects...)
	}
	return objects, nil
}

// checkObjects rejects objects that cannot be applied: without apiVersion,
// kind or name.
func checkObjects(objects []*unstructured.Unstructured) error {
	for _, o := range objects {
		switch {
		case o.GetAPIVersion() == "":
			return fmt.Errorf("object %s/%s has no apiVersion", o.GetKind(), o.GetName())
		case o.GetKind() == "":
			return fmt.Errorf("object %s has no kind", o.GetName())
		case o.GetName() == "" && o.GetGenerateName() == "":
			return fmt.Errorf("%s object has no metadata.name", o.GetKind())
		case o.GetName() == "":
			return fmt.Errorf("%s object has only metadata.generateName, which cannot be applied", o.GetKind())
		}
	}
	return nil
}
