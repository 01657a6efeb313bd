package apply

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/yaml"
)

// kustomize reads most of what a kustomization names through its loader,
// and that loader fetches any http(s) URL itself (configMapGenerator files,
// patches, replacements, openapi, crds, ...), and clones any Git URL it is
// given as a base; neither can be switched off or given another client.
// So every kustomize configuration is checked before kustomize sees it, as
// a whole rather than field by field: each of its strings is refused when
// it names a remote location, whatever field holds it, present or future.
// Only the values kustomize copies into objects and never loads are left
// alone (see copiedValues), so that an annotation may hold a URL.

// copiedValues are the keys (compared as kustomize's decoder compares
// them, ignoring case) whose values kustomize copies verbatim and never
// loads: annotations and generator literals.
var copiedValues = []string{"annotations", "commonAnnotations", "literals"}

var (
	// urlScheme matches a URL with a scheme and an authority: what
	// kustomize's loader fetches over HTTP(S) and clones over HTTPS, SSH
	// or file://, and any other scheme.
	urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)
	// scpUser matches the SCP-like Git form user@host:path.
	scpUser = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*@`)
)

// namesRemote tells whether kustomize could take s, or what follows an
// `=` in it (the key=path form of generator files), as a remote location.
func namesRemote(s string) bool {
	candidates := []string{s}
	for i := range len(s) {
		if s[i] == '=' {
			candidates = append(candidates, s[i+1:])
		}
	}
	for _, c := range candidates {
		c = strings.TrimSpace(c)
		if len(c) >= 5 && strings.EqualFold(c[:5], "git::") {
			c = c[5:]
		}
		lower := strings.ToLower(c)
		if urlScheme.MatchString(c) || scpUser.MatchString(c) ||
			strings.HasPrefix(lower, "github.com/") || strings.HasPrefix(lower, "github.com:") {
			return true
		}
	}
	return false
}

// configCheck checks kustomize configurations for remote locations.
type configCheck struct {
	// resources decodes configurations as kustomize decodes them.
	resources *resource.Factory
}

// kustomization returns an error naming the first field of a kustomization
// file that names a remote location. The file is decoded as kustomize
// decodes it; one kustomize cannot decode is left to kustomize to report.
func (k configCheck) kustomization(data []byte) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil
	}
	var doc any
	if err := json.Unmarshal(j, &doc); err != nil {
		return nil
	}
	return k.node(doc, "", true)
}

// pluginConfigs returns an error naming the first field of a builtin
// generator or transformer configuration in data (a file kustomize reads,
// or an inline entry of a kustomization) that names a remote location.
// Documents of other kinds are objects, whose values are never loaded.
func (k configCheck) pluginConfigs(data []byte) error {
	// A document says apiVersion: builtin only by holding the word or by
	// escapes, which need a backslash (YAML folds lines with a space):
	// other files, most resources, are not decoded twice.
	if !bytes.Contains(data, []byte(konfig.BuiltinPluginApiVersion)) && !bytes.Contains(data, []byte(`\`)) {
		return nil
	}
	resources, err := k.resources.SliceFromBytes(data)
	if err != nil {
		return nil
	}
	for _, res := range resources {
		gvk := res.GetGvk()
		if gvk.Group != "" || gvk.Version != konfig.BuiltinPluginApiVersion {
			continue
		}
		m, err := res.Map()
		if err == nil {
			err = k.node(m, "", false)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, res.GetName(), err)
		}
	}
	return nil
}

// node checks every string under n, at field. In a kustomization (inline
// set), a string may also be an inline plugin configuration.
func (k configCheck) node(n any, field string, inline bool) error {
	switch v := n.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		for _, key := range keys {
			if slices.ContainsFunc(copiedValues, func(c string) bool { return strings.EqualFold(c, key) }) {
				continue
			}
			child := key
			if field != "" {
				child = field + "." + key
			}
			if err := k.node(v[key], child, inline); err != nil {
				return err
			}
		}
	case []any:
		for i, item := range v {
			if err := k.node(item, field+"["+strconv.Itoa(i)+"]", inline); err != nil {
				return err
			}
		}
	case string:
		if namesRemote(v) {
			return fmt.Errorf("%s: remote location %q is not allowed: a build reads only files of the checkout", field, v)
		}
		if inline && strings.Contains(v, ":") {
			if err := k.pluginConfigs([]byte(v)); err != nil {
				return fmt.Errorf("%s: %w", field, err)
			}
		}
	}
	return nil
}
