package update

import (
	"fmt"
	"slices"
	"strings"
	"text/template"
)

// CommitData is what a commit message template is executed on.
type CommitData struct {
	// Automation is the UpdateAutomation as namespace/name.
	Automation string
	// Changes lists every value changed, file by file.
	Changes []Change
	// Updates lists each policy's move, one per policy and version.
	Updates []PolicyUpdate
	// CRDs lists, one line per CRD bundle that changed, what changed in it
	// (`crds: agents.example.com 1.4.1 --> 1.4.2, new: policies.example.com`).
	CRDs []string
}

// DefaultMessageTemplate is the commit message when the automation sets
// none: a subject naming the one policy and version (or the number of
// images), then one line per changed value as `<file>: <old> --> <new>`,
// then one line per changed CRD bundle.
const DefaultMessageTemplate = `{{ subject . }}

{{ range .Changes }}{{ .File }}: {{ .OldValue }} --> {{ .NewValue }}
{{ end }}{{ range .CRDs }}{{ . }}
{{ end }}`

// ParseMessageTemplate parses a commit message template; an empty text
// means DefaultMessageTemplate. Besides text/template's own, templates may
// call `subject` on the CommitData. Its execution is bounded as
// message_bounds.go says.
func ParseMessageTemplate(text string) (*template.Template, error) {
	if text == "" {
		text = DefaultMessageTemplate
	}
	return parseBounded("commit", text, messageFuncs(), "missingkey=error")
}

// messageFuncs are the functions of an UpdateAutomation's message template.
func messageFuncs() template.FuncMap {
	funcs := builtinFuncs()
	funcs["subject"] = Subject
	return funcs
}

// CommitMessage executes t on data and returns the message with trailing
// white space trimmed to one newline. A template that goes past a bound
// fails with an error wrapping ErrTemplateBound.
func CommitMessage(t *template.Template, data CommitData) (string, error) {
	msg, err := executeBounded(t, messageFuncs(), data)
	if err != nil {
		return "", fmt.Errorf("writing the commit message: %w", err)
	}
	return strings.TrimRight(msg, " \n\t") + "\n", nil
}

// Subject is the default subject line: `Update agent to 1.4.2` when one
// policy moves, even from several old versions (files at 1.4.0 and
// 1.4.1), and `Update 3 images` when several policies move.
func Subject(data CommitData) string {
	var policies []PolicyKey
	newVersion := ""
	for _, u := range data.Updates {
		if !slices.Contains(policies, u.Policy) {
			policies = append(policies, u.Policy)
		}
		// All updates of one policy move to its one latest reference; the
		// longest form (tag@digest over tag) says the most about it.
		if _, v := u.Versions(); len(v) > len(newVersion) {
			newVersion = v
		}
	}
	if len(policies) == 0 && len(data.CRDs) > 0 {
		return "Update CRDs"
	}
	if len(policies) == 1 {
		return fmt.Sprintf("Update %s to %s", policies[0].Name, newVersion)
	}
	return fmt.Sprintf("Update %d images", len(policies))
}
