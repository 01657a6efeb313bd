package update

import (
	"fmt"
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
}

// DefaultMessageTemplate is the commit message when the automation sets
// none: a subject naming the one policy and version (or the number of
// images), then one line per changed value as `<file>: <old> --> <new>`.
const DefaultMessageTemplate = `{{ subject . }}

{{ range .Changes }}{{ .File }}: {{ .OldValue }} --> {{ .NewValue }}
{{ end }}`

// ParseMessageTemplate parses a commit message template; an empty text
// means DefaultMessageTemplate. Besides text/template's own, templates may
// call `subject` on the CommitData.
func ParseMessageTemplate(text string) (*template.Template, error) {
	if text == "" {
		text = DefaultMessageTemplate
	}
	t, err := template.New("commit").Funcs(template.FuncMap{"subject": Subject}).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parsing the commit message template: %w", err)
	}
	return t, nil
}

// CommitMessage executes t on data and returns the message with trailing
// white space trimmed to one newline.
func CommitMessage(t *template.Template, data CommitData) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("writing the commit message: %w", err)
	}
	return strings.TrimRight(b.String(), " \n\t") + "\n", nil
}

// Subject is the default subject line: `Update agent to 1.4.2` for one
// update, `Update 3 images` for several.
func Subject(data CommitData) string {
	if len(data.Updates) == 1 {
		u := data.Updates[0]
		_, newVersion := u.Versions()
		return fmt.Sprintf("Update %s to %s", u.Policy.Name, newVersion)
	}
	return fmt.Sprintf("Update %d images", len(data.Updates))
}
