package apply

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
// checkout): no file outside root is read, neither by kustomize (whose
// bases may be anywhere under root, such as ../../base) nor through
// symbolic links. Remote bases and kustomize plugins are refused.
//
// Plain YAML files may hold several documents; empty documents are skipped,
// as are directories whose name starts with a dot (.git, .github). An
// object without apiVersion, kind or name, invalid YAML, or the same object
// twice makes the whole build fail with a *BuildError naming the file.
func BuildWithin(root, path string) ([]*unstructured.Unstructured, error) {
	realRoot, err := resolveRoot(root)
	if err != nil {
		return nil, &BuildError{Path: root, Err: err}
	}
	dir := filepath.Join(realRoot, path)
	if !within(realRoot, dir) {
		return nil, &BuildError{Path: path, Err: fmt.Errorf("path is outside %s", root)}
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, &BuildError{Path: dir, Err: err}
	}
	if !info.IsDir() {
		return nil, &BuildError{Path: dir, Err: errors.New("not a directory")}
	}
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return buildKustomization(realRoot, dir)
		}
	}
	return buildPlain(realRoot, dir)
}

// resolveRoot returns the absolute path of root with symbolic links
// resolved, so that later containment checks compare like with like.
func resolveRoot(root string) (string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("resolving root: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolving root: %w", err)
	}
	return real, nil
}

// within tells whether path is root or lies under it, lexically.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// buildKustomization runs krusty on dir with plugins disabled, on a
// read-only file system confined to root.
func buildKustomization(root, dir string) ([]*unstructured.Unstructured, error) {
	opts := krusty.MakeDefaultOptions()
	fsys := newConfinedFS(root)
	resMap, err := krusty.MakeKustomizer(opts).Run(fsys, dir)
	if fsys.refused != nil {
		return nil, &BuildError{Path: dir, Err: fsys.refused}
	}
	if err != nil {
		return nil, &BuildError{Path: dir, Err: fmt.Errorf("kustomize build: %w", err)}
	}
	objects := make([]*unstructured.Unstructured, 0, resMap.Size())
	for _, res := range resMap.Resources() {
		m, err := res.Map()
		if err != nil {
			return nil, &BuildError{Path: dir, Err: fmt.Errorf("converting %s: %w", res.CurId(), err)}
		}
		objects = append(objects, &unstructured.Unstructured{Object: m})
	}
	if err := checkObjects(objects); err != nil {
		return nil, &BuildError{Path: dir, Err: err}
	}
	return objects, nil
}

// buildPlain reads every YAML file under dir.
func buildPlain(root, dir string) ([]*unstructured.Unstructured, error) {
	var objects []*unstructured.Unstructured
	seen := map[object.ObjMetadata]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return &BuildError{Path: path, Err: err}
		}
		if d.IsDir() {
			if path != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(path)
			if err != nil {
				return &BuildError{Path: path, Err: err}
			}
			if !within(root, target) {
				return &BuildError{Path: path, Err: fmt.Errorf("symbolic link leads outside %s", root)}
			}
		}
		docs, err := readYAMLFile(path)
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

// readYAMLFile decodes every non-empty document of a file, expanding Lists.
func readYAMLFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading file: %w", err)
	}
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
