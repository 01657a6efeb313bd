package update

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// FluxDefaultMessageTemplate is the commit message of an
// ImageUpdateAutomation that sets no template, as in Flux.
const FluxDefaultMessageTemplate = `Update from image update automation`

// ErrRemovedTemplateField is wrapped by the error of a Flux template that
// uses a field Flux's v1 API removed (`.Updated`, `.Changed.ImageResult`);
// Flux stalls such an automation, and so does uprev.
var ErrRemovedTemplateField = errors.New("template uses a field removed from Flux's v1 API")

// FluxMessageData is what the commit message template of Flux's
// ImageUpdateAutomation (image.toolkit.fluxcd.io/v1) is executed on, field
// for field as in image-automation-controller, so a template written for
// Flux writes the same message under uprev.
type FluxMessageData struct {
	// AutomationObject is the ImageUpdateAutomation's namespace and name.
	AutomationObject types.NamespacedName
	// Changed is what the run changed, by file and object.
	Changed FluxResult
	// Values are spec.git.commit.messageTemplateValues.
	Values map[string]string
}

// FluxResult is a run's changes as Flux's templates see them: by file
// (relative to update.path), then by object.
type FluxResult struct {
	// FileChanges maps each changed file to the changes of its objects.
	FileChanges map[string]FluxObjectChanges
	// order is the order of the changes in the run, which Changes keeps.
	order []FluxChange
}

// FluxObjectChanges maps an object to its changes.
type FluxObjectChanges map[FluxObjectIdentifier][]FluxChange

// FluxObjectIdentifier identifies an object by apiVersion, kind, name and
// namespace (kyaml's ResourceIdentifier), as in Flux.
type FluxObjectIdentifier struct {
	yaml.ResourceIdentifier
}

// FluxChange is one changed value: its old and new value, and the setter
// (the marker's `namespace:name[:suffix]`) that changed it.
type FluxChange struct {
	OldValue string
	NewValue string
	Setter   string
}

// NewFluxResult groups res's changes as Flux does; file names are made
// relative to updatePath, the automation's update.path.
func NewFluxResult(res Result, updatePath string) FluxResult {
	out := FluxResult{FileChanges: map[string]FluxObjectChanges{}}
	root := path.Clean(strings.TrimPrefix(path.Clean("/"+updatePath), "/"))
	for _, c := range res.Changes {
		file := c.File
		if root != "." && root != "" {
			file = strings.TrimPrefix(file, root+"/")
		}
		id := FluxObjectIdentifier{yaml.ResourceIdentifier{
			TypeMeta: yaml.TypeMeta{APIVersion: c.Object.APIVersion, Kind: c.Object.Kind},
			NameMeta: yaml.NameMeta{Name: c.Object.Name, Namespace: c.Object.Namespace},
		}}
		ch := FluxChange{OldValue: c.OldValue, NewValue: c.NewValue, Setter: Marker{Policy: c.Policy, Kind: c.Kind}.String()}
		if out.FileChanges[file] == nil {
			out.FileChanges[file] = FluxObjectChanges{}
		}
		out.FileChanges[file][id] = append(out.FileChanges[file][id], ch)
		out.order = append(out.order, ch)
	}
	return out
}

// Changes returns every distinct change once. Flux returns them in map
// order, which varies from run to run; uprev returns them in file and line
// order, which is one of Flux's orders and the same every time.
func (r FluxResult) Changes() []FluxChange {
	seen := map[FluxChange]bool{}
	var out []FluxChange
	for _, c := range r.order {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// Objects returns the changes by object, whatever file they are in.
func (r FluxResult) Objects() FluxObjectChanges {
	out := FluxObjectChanges{}
	for _, objects := range r.FileChanges {
		for id, changes := range objects {
			out[id] = append(out[id], changes...)
		}
	}
	return out
}

// ParseFluxMessageTemplate parses a Flux ImageUpdateAutomation message
// template with the functions Flux gives it (sprig's hermetic ones), less
// removedSprigFuncs, with those that allocate from a number capped; an
// empty text means FluxDefaultMessageTemplate. Its execution is bounded
// as message_bounds.go says.
func ParseFluxMessageTemplate(text string) (*template.Template, error) {
	if text == "" {
		text = FluxDefaultMessageTemplate
	}
	return parseBounded("commit message", text, fluxFuncs())
}

// fluxFuncs are the functions of a Flux message template.
func fluxFuncs() template.FuncMap {
	funcs := sprig.HermeticTxtFuncMap()
	for _, name := range removedSprigFuncs {
		delete(funcs, name)
	}
	cappedSprigFuncs(funcs)
	for name, fn := range builtinFuncs() {
		funcs[name] = fn
	}
	return funcs
}

// FluxCommitMessage executes t on data; the message is the template's
// output as it is, as in Flux. A template that uses a removed field fails
// with an error wrapping ErrRemovedTemplateField that names the field; one
// that goes past a bound, with an error wrapping ErrTemplateBound.
func FluxCommitMessage(t *template.Template, data FluxMessageData) (string, error) {
	msg, err := executeBounded(t, fluxFuncs(), data)
	if err != nil {
		for field, pattern := range map[string]string{
			".Updated":             "can't evaluate field Updated",
			".Changed.ImageResult": "can't evaluate field ImageResult",
		} {
			if strings.Contains(err.Error(), pattern) {
				return "", fmt.Errorf("%w: %s; use .Changed.FileChanges, .Changed.Objects or .Changed.Changes (https://fluxcd.io/flux/components/image/imageupdateautomations/#message-template)", ErrRemovedTemplateField, field)
			}
		}
		return "", fmt.Errorf("writing the commit message: %w", err)
	}
	return msg, nil
}
