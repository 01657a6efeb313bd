package update

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestDefaultCommitMessage(t *testing.T) {
	agent := PolicyKey{Namespace: "fleet", Name: "agent"}
	web := PolicyKey{Namespace: "fleet", Name: "web"}
	one := CommitData{
		Changes: []Change{{File: "clusters/prod/agent.yaml", Policy: agent,
			OldValue: "ghcr.io/acme/agent:1.4.1", NewValue: "ghcr.io/acme/agent:1.4.2@sha256:aa"}},
		Updates: []PolicyUpdate{{Policy: agent, Old: Ref{Tag: "1.4.1"}, New: Ref{Tag: "1.4.2", Digest: "sha256:aa"}}},
	}
	several := CommitData{
		Changes: []Change{
			{File: "a.yaml", Policy: agent, OldValue: "1.4.1", NewValue: "1.4.2"},
			{File: "b.yaml", Policy: web, OldValue: "2.0.0", NewValue: "2.1.0"},
			{File: "c.yaml", Policy: web, OldValue: "2.0.0", NewValue: "2.1.0"},
		},
		Updates: []PolicyUpdate{
			{Policy: agent, Old: Ref{Tag: "1.4.1"}, New: Ref{Tag: "1.4.2"}},
			{Policy: web, Old: Ref{Tag: "2.0.0"}, New: Ref{Tag: "2.1.0"}},
		},
	}
	for _, tc := range []struct {
		name     string
		template string
		data     CommitData
		want     string
	}{
		{name: "one update", data: one, want: "Update agent to 1.4.2\n\n" +
			"clusters/prod/agent.yaml: ghcr.io/acme/agent:1.4.1 --> ghcr.io/acme/agent:1.4.2@sha256:aa\n"},
		{name: "several updates", data: several, want: "Update 2 images\n\n" +
			"a.yaml: 1.4.1 --> 1.4.2\nb.yaml: 2.0.0 --> 2.1.0\nc.yaml: 2.0.0 --> 2.1.0\n"},
		{name: "custom template", data: several,
			template: "chore(deps): {{ subject . }}\n\n{{ range .Updates }}- {{ .Policy.Name }}: {{ .String }}\n{{ end }}",
			want:     "chore(deps): Update 2 images\n\n- agent: fleet/agent 1.4.1 --> 1.4.2\n- web: fleet/web 2.0.0 --> 2.1.0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tmpl, err := ParseMessageTemplate(tc.template)
			g.Expect(err).NotTo(HaveOccurred())
			msg, err := CommitMessage(tmpl, tc.data)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(msg).To(Equal(tc.want))
		})
	}
}

func TestInvalidMessageTemplate(t *testing.T) {
	g := NewWithT(t)
	_, err := ParseMessageTemplate("{{ .Changes ")
	g.Expect(err).To(MatchError(ContainSubstring("parsing the commit message template")))

	tmpl, err := ParseMessageTemplate("{{ .NoSuchField }}")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = CommitMessage(tmpl, CommitData{})
	g.Expect(err).To(MatchError(ContainSubstring("NoSuchField")))
}
