package update

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"gopkg.in/yaml.v3"
)

var (
	agentKey = PolicyKey{Namespace: "ns", Name: "agent"}
	agentRef = Ref{Image: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: "sha256:abc"}
)

// rewrite runs rewriteFile on src with the agent policy.
func rewrite(src string, guard Guard) fileResult {
	rw := &rewriter{policies: map[PolicyKey]Ref{agentKey: agentRef}, guard: guard}
	return rw.rewriteFile("f.yaml", []byte(src))
}

func TestRewriteFileKeepsBytes(t *testing.T) {
	cases := map[string]struct{ src, want string }{
		"CRLF line ends": {
			src:  "a: 1\r\nimage: ghcr.io/acme/agent:1.0 # {\"$imagepolicy\": \"ns:agent\"}\r\nb: 2\r\n",
			want: "a: 1\r\nimage: ghcr.io/acme/agent:1.4.2@sha256:abc # {\"$imagepolicy\": \"ns:agent\"}\r\nb: 2\r\n",
		},
		"byte order mark and wide characters": {
			src:  "\uFEFFnäme: \"ü\"\nbild: 'é:1' # {\"$imagepolicy\": \"ns:agent:tag\"}\n",
			want: "\uFEFFnäme: \"ü\"\nbild: '1.4.2' # {\"$imagepolicy\": \"ns:agent:tag\"}\n",
		},
		"tab before comment and no final newline": {
			src:  "tag: 1.0\t# {\"$imagepolicy\": \"ns:agent:tag\"}",
			want: "tag: 1.4.2\t# {\"$imagepolicy\": \"ns:agent:tag\"}",
		},
		"value on the line after its key": {
			src:  "tag: # {\"$imagepolicy\": \"ns:agent:tag\"}\n  1.0\nnext: x\n",
			want: "tag: # {\"$imagepolicy\": \"ns:agent:tag\"}\n  1.4.2\nnext: x\n",
		},
		"anchor and tag before the value": {
			src:  "tag: &t !!str 1.0 # {\"$imagepolicy\": \"ns:agent:tag\"}\nother: *t\n",
			want: "tag: &t !!str 1.4.2 # {\"$imagepolicy\": \"ns:agent:tag\"}\nother: *t\n",
		},
		"escapes in a double-quoted value": {
			src:  "name: \"ghcr.io/\\u0061cme/old\" # {\"$imagepolicy\": \"ns:agent:name\"}\n",
			want: "name: \"ghcr.io/acme/agent\" # {\"$imagepolicy\": \"ns:agent:name\"}\n",
		},
		"value in a multi-line flow sequence": {
			src:  "images: [\n  x:1, # {\"$imagepolicy\": \"ns:agent\"}\n  y:2\n]\n",
			want: "images: [\n  ghcr.io/acme/agent:1.4.2@sha256:abc, # {\"$imagepolicy\": \"ns:agent\"}\n  y:2\n]\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			res := rewrite(tc.src, nil)
			g.Expect(res.errs).To(BeEmpty())
			g.Expect(string(res.out)).To(Equal(tc.want))
		})
	}
}

func TestRewriteFileUnsupportedValues(t *testing.T) {
	cases := map[string]struct{ src, err string }{
		"multi-line plain value": {
			src: "image: ghcr.io/acme/agent:1.0\n  continued # {\"$imagepolicy\": \"ns:agent\"}\n",
			err: "plain value spans several lines",
		},
		"multi-line quoted value": {
			src: "image: \"ghcr.io/acme/agent:1.0\n  continued\" # {\"$imagepolicy\": \"ns:agent\"}\n",
			err: "quoted value spans several lines",
		},
		"folded block scalar": {
			src: "image: > # {\"$imagepolicy\": \"ns:agent\"}\n  ghcr.io/acme/agent:1.0\n",
			err: "block scalar",
		},
		"alias": {
			src: "a: &x ghcr.io/acme/agent:1.0\nb: *x # {\"$imagepolicy\": \"ns:agent\"}\n",
			err: "marker on an alias",
		},
		"empty value": {
			src: "tag: # {\"$imagepolicy\": \"ns:agent:tag\"}\nnext: 1\n",
			err: "empty value",
		},
		"mapping value": {
			src: "image: # {\"$imagepolicy\": \"ns:agent\"}\n  tag: 1.0\n",
			err: "marker on a collection",
		},
		"two markers": {
			src: "image: # {\"$imagepolicy\": \"ns:agent\"}\n  x:1 # {\"$imagepolicy\": \"ns:agent\"}\n",
			err: "two markers on one value",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			res := rewrite(tc.src, nil)
			g.Expect(res.out).To(BeNil())
			g.Expect(res.changes).To(BeEmpty())
			g.Expect(res.errs).To(HaveLen(1))
			g.Expect(res.errs[0]).To(MatchError(ErrInvalidMarker))
			g.Expect(res.errs[0]).To(MatchError(ContainSubstring(tc.err)))
		})
	}
}

func TestRenderScalar(t *testing.T) {
	cases := []struct {
		value, style string
		flow         bool
		want         string
	}{
		{value: "1.4.2", want: "1.4.2"},
		{value: "v1", want: "v1"},
		{value: "1.10", want: `"1.10"`},
		{value: "2", want: `"2"`},
		{value: "true", want: `"true"`},
		{value: "null", want: `"null"`},
		{value: "sha256:abc", want: "sha256:abc"},
		{value: "ghcr.io/a:1@sha256:abc", want: "ghcr.io/a:1@sha256:abc"},
		{value: "a,b", want: "a,b"},
		{value: "a,b", flow: true, want: `"a,b"`},
		{value: "- a", want: `"- a"`},
		{value: "a: b", want: `"a: b"`},
		{value: "a #b", want: `"a #b"`},
		{value: "", want: `""`},
		{value: "1.4.2", style: "'", want: "'1.4.2'"},
		{value: "it's", style: "'", want: "'it''s'"},
		{value: "a\nb", style: "'", want: `"a\nb"`},
		{value: `say "hi" \ bye`, style: `"`, want: `"say \"hi\" \\ bye"`},
		{value: "tab\there\u2028\u0085\x01", style: `"`, want: `"tab\there\u2028\u0085\u0001"`},
		{value: "\U0001F600", style: `"`, want: "\"\U0001F600\""},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		style := map[string]yaml.Style{"": 0, "'": yaml.SingleQuotedStyle, `"`: yaml.DoubleQuotedStyle}[tc.style]
		g.Expect(renderScalar(tc.value, style, tc.flow)).To(Equal(tc.want), "%q", tc.value)
	}
}

func TestGuardRefusesWholeUnit(t *testing.T) {
	g := NewWithT(t)
	src := `values:
  tag: 1.5.0 # {"$imagepolicy": "ns:agent:tag"}
  digest: sha256:old # {"$imagepolicy": "ns:agent:digest"}
---
tag: 1.4.0 # {"$imagepolicy": "ns:agent:tag"}
digest: sha256:old # {"$imagepolicy": "ns:agent:digest"}
`
	var seen []Change
	guard := func(c Change) error {
		seen = append(seen, c)
		if c.Kind == KindTag && c.OldValue == "1.5.0" {
			return errors.New("downgrade")
		}
		return nil
	}
	res := rewrite(src, guard)
	g.Expect(res.errs).To(BeEmpty())
	g.Expect(seen).To(HaveLen(4))
	// The digest change learns the document's tag.
	g.Expect(seen[1].Old).To(Equal(Ref{Tag: "1.5.0", Digest: "sha256:old"}))
	g.Expect(seen[1].New).To(Equal(Ref{Tag: "1.4.2", Digest: "sha256:abc"}))
	g.Expect(seen[1].Latest).To(Equal(agentRef))
	g.Expect(res.refused).To(HaveLen(2))
	g.Expect(res.refused[0].Change.Kind).To(Equal(KindTag))
	g.Expect(res.refused[1].Change.Kind).To(Equal(KindDigest))
	g.Expect(res.refused[1].Reason).To(MatchError("downgrade"))
	g.Expect(res.changes).To(HaveLen(2))
	g.Expect(string(res.out)).To(Equal(`values:
  tag: 1.5.0 # {"$imagepolicy": "ns:agent:tag"}
  digest: sha256:old # {"$imagepolicy": "ns:agent:digest"}
---
tag: 1.4.2 # {"$imagepolicy": "ns:agent:tag"}
digest: sha256:abc # {"$imagepolicy": "ns:agent:digest"}
`))
}

func TestGuardHold(t *testing.T) {
	g := NewWithT(t)
	held := map[PolicyKey]string{agentKey: "1.4.2"}
	guard := func(c Change) error {
		if held[c.Policy] == c.Latest.Tag {
			return errors.New("held after revert")
		}
		return nil
	}
	res := rewrite("image: ghcr.io/acme/agent:1.4.1 # {\"$imagepolicy\": \"ns:agent\"}\n", guard)
	g.Expect(res.out).To(BeNil())
	g.Expect(res.refused).To(ConsistOf(HaveField("Reason", MatchError("held after revert"))))
}

func TestRewriteFileUnchanged(t *testing.T) {
	g := NewWithT(t)
	res := rewrite("image: ghcr.io/acme/agent:1.4.2@sha256:abc # {\"$imagepolicy\": \"ns:agent\"}\n", func(Change) error {
		t.Error("guard asked about an unchanged value")
		return nil
	})
	g.Expect(res).To(Equal(fileResult{}))
}
