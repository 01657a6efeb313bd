package update_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/uprev-dev/uprev/internal/update"
)

// Templates and expected messages from image-automation-controller's
// internal/source/source_test.go, so that a Flux template writes what Flux
// writes.
const (
	fluxTemplateResultV2 = `Commit summary with ResultV2

Automation: {{ .AutomationObject }}

{{ range $filename, $objchange := .Changed.FileChanges -}}
- File: {{ $filename }}
{{- range $obj, $changes := $objchange }}
  - Object: {{ $obj.Kind }}/{{ $obj.Namespace }}/{{ $obj.Name }}
    Changes:
{{- range $_ , $change := $changes }}
    - {{ $change.OldValue }} -> {{ $change.NewValue }}
{{ end -}}
{{ end -}}
{{ end -}}
`
	fluxTemplateWithValues = `Commit summary

Automation: {{ .AutomationObject }}

Cluster: {{ index .Values "cluster" }}
Testing: {{ .Values.testing }}
`
	fluxTemplateRemoved = `Commit summary

Files:
{{ range $filename, $_ := .Updated.Files -}}
- {{ $filename }}
{{ end -}}
`
	fluxTemplateImageResult = `{{ range $filename, $_ := .Changed.ImageResult.Files -}}
- {{ $filename }}
{{ end -}}`
	// fluxTemplateChanges uses sprig, .Changed.Changes and .Changed.Objects.
	fluxTemplateChanges = `{{ len .Changed.Changes }} {{ "changes" | upper }}
{{ range .Changed.Changes -}}
{{ .Setter }}: {{ .OldValue }} -> {{ .NewValue }}
{{ end -}}
{{ range $obj, $changes := .Changed.Objects -}}
{{ $obj.Kind }} {{ $obj.Name }}: {{ len $changes }}
{{ end -}}`
)

// helloworldResult is a run that moved helloworld in a Deployment named
// test under update.path ./apps.
func helloworldResult() update.Result {
	deployment := update.Object{APIVersion: "apps/v1", Kind: "Deployment", Name: "test"}
	policy := update.PolicyKey{Namespace: "test-ns", Name: "helloworld"}
	return update.Result{Changes: []update.Change{
		{File: "apps/deploy.yaml", Line: 9, Object: deployment, Policy: policy, Kind: update.KindImage,
			OldValue: "helloworld:1.0.0", NewValue: "helloworld:1.0.1"},
		{File: "apps/nested/other.yaml", Line: 4, Object: update.Object{Kind: "Kustomization"}, Policy: policy, Kind: update.KindTag,
			OldValue: "1.0.0", NewValue: "1.0.1"},
		{File: "apps/nested/other.yaml", Line: 9, Object: update.Object{Kind: "Kustomization"}, Policy: policy, Kind: update.KindTag,
			OldValue: "1.0.0", NewValue: "1.0.1"},
	}}
}

func TestFluxCommitMessageMatchesFlux(t *testing.T) {
	automation := types.NamespacedName{Namespace: "test-ns", Name: "test-update"}
	oneChange := helloworldResult()
	oneChange.Changes = oneChange.Changes[:1]
	cases := []struct {
		name     string
		template string
		result   update.Result
		values   map[string]string
		want     string
	}{
		{name: "default", result: oneChange, want: "Update from image update automation"},
		{name: "result v2", template: fluxTemplateResultV2, result: oneChange, want: `Commit summary with ResultV2

Automation: test-ns/test-update

- File: deploy.yaml
  - Object: Deployment//test
    Changes:
    - helloworld:1.0.0 -> helloworld:1.0.1
`},
		{name: "values", template: fluxTemplateWithValues, result: oneChange,
			values: map[string]string{"cluster": "prod", "testing": "value"}, want: `Commit summary

Automation: test-ns/test-update

Cluster: prod
Testing: value
`},
		{name: "changes and objects", template: fluxTemplateChanges, result: helloworldResult(), want: `2 CHANGES
test-ns:helloworld: helloworld:1.0.0 -> helloworld:1.0.1
test-ns:helloworld:tag: 1.0.0 -> 1.0.1
Kustomization : 2
Deployment test: 1
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tmpl, err := update.ParseFluxMessageTemplate(tc.template)
			g.Expect(err).NotTo(HaveOccurred())
			msg, err := update.FluxCommitMessage(tmpl, update.FluxMessageData{
				AutomationObject: automation, Changed: update.NewFluxResult(tc.result, "./apps"), Values: tc.values,
			})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(msg).To(Equal(tc.want))
		})
	}
}

func TestFluxCommitMessageNamesARemovedField(t *testing.T) {
	for field, text := range map[string]string{".Updated": fluxTemplateRemoved, ".Changed.ImageResult": fluxTemplateImageResult} {
		g := NewWithT(t)
		tmpl, err := update.ParseFluxMessageTemplate(text)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = update.FluxCommitMessage(tmpl, update.FluxMessageData{Changed: update.NewFluxResult(helloworldResult(), "")})
		g.Expect(err).To(MatchError(update.ErrRemovedTemplateField))
		g.Expect(err.Error()).To(ContainSubstring(field + ";"))
	}
}

func TestNewFluxResultKeysFilesByUpdatePath(t *testing.T) {
	g := NewWithT(t)
	for _, path := range []string{"apps", "./apps", "apps/", "/apps"} {
		g.Expect(update.NewFluxResult(helloworldResult(), path).FileChanges).To(HaveKey("nested/other.yaml"), path)
	}
	g.Expect(update.NewFluxResult(helloworldResult(), "").FileChanges).To(HaveKey("apps/deploy.yaml"))
	g.Expect(update.NewFluxResult(helloworldResult(), ".").FileChanges).To(HaveKey("apps/deploy.yaml"))
}
