package notes

import (
	"regexp"
	"strings"
	"testing"

	"github.com/uprev-dev/uprev/internal/guard"
)

// mention matches what GitHub, GitLab and Gitea turn into a mention of a
// user or team, or a reference to an issue.
var mention = regexp.MustCompile(`(?i)(^|[^\w])([@#][a-z0-9]|gh-[0-9])`)

// TestRenderHostileNotes: release notes are untrusted. Whatever they say,
// the rendered body mentions nobody, references no issue, opens or closes
// no HTML element (so it stays inside its <details>), and holds no line
// that reads as uprev's own (a trailer, the body's closing line).
func TestRenderHostileNotes(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"mentions", "Thanks @someone and @acme/security-team, cc @ghost"},
		{"entity mention", "Thanks &#64;someone and &commat;other"},
		{"issue references", "Fixes #12, acme/other#34 and GH-56"},
		{"closes details", "done\n</details>\n\n## Uprev says: safe to merge\n<details><summary>x"},
		{"raw HTML", `<img src="https://evil.example/track.png"><script>alert(1)</script><a href="https://evil.example">ok</a>`},
		{"fake trailer", "fine\n\nUprev-Update: apps/agent 1.0.0 --> 6.6.6\nUprev-Policy: apps/agent"},
		{"fake footer", "\n---\nOpened by uprev for UpdateAutomation apps/all at 0123456789. Approved.\n"},
		{"unclosed fence", "```\neverything after is code\n"},
		{"bidi and controls", "a\u202egnp.exe\r\x1b[31mred\x00"},
		{"carriage returns", "line\r\nUprev-Update: x 1 --> 2\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := Render([]Change{{
				Title:    "apps/agent: `1.0.0` --> `1.1.0`",
				Source:   "https://github.com/acme/agent",
				Releases: []Release{{Tag: "v1.1.0", Name: "@owner <b>1.1</b>", URL: "https://github.com/acme/agent/releases/tag/v1.1.0", Body: tc.body}},
				// What a gate checked quotes the signer and the attestation,
				// as hostile as the notes.
				Checked: []string{"Signature: keyless identity " + tc.body, "Refused: 1.2.0: " + tc.body},
			}}, 65536)
			checkInert(t, out)
		})
	}
}

// checkInert fails t when out, a rendering of one change, is not inert.
func checkInert(t *testing.T, out string) {
	t.Helper()
	if m := mention.FindString(out); m != "" {
		t.Errorf("mentions or references %q:\n%s", m, out)
	}
	if n := strings.Count(out, "<"); n != 4 || !strings.Contains(out, "\n<details><summary>") || !strings.HasSuffix(out, "</details>\n\n") {
		t.Errorf("has %d '<', not only its own <details><summary></summary> and </details>:\n%s", n, out)
	}
	if trailers := guard.ParseUpdateTrailers(out); len(trailers) > 0 {
		t.Errorf("holds Uprev-Update trailers %v:\n%s", trailers, out)
	}
	var refs []string
	for _, ref := range characterRef.FindAllString(out, -1) {
		if ref != "&lt;" && ref != "&amp;" {
			refs = append(refs, ref)
		}
	}
	if len(refs) > 0 {
		t.Errorf("holds character references %q, which render as the characters they name:\n%s", refs, out)
	}
	fences := 0
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
			fences++
		}
		if strings.HasPrefix(line, "Uprev-") || strings.HasPrefix(line, "Opened by uprev") || line == "---" {
			t.Errorf("line %q reads as uprev's own:\n%s", line, out)
		}
		if strings.ContainsAny(line, "\r\x00\x1b\u202e") {
			t.Errorf("line %q holds a control or bidi character", line)
		}
	}
	if fences%2 != 0 {
		t.Errorf("an unclosed code fence swallows what follows it:\n%s", out)
	}
}

// characterRef matches an HTML character reference that is not one of
// Sanitize's own escapes.
var characterRef = regexp.MustCompile(`&(#[0-9]+|#x[0-9a-f]+|[a-z]+);`)

// TestRenderBounds: each change's notes stay within 64 KiB and the whole
// within the budget; what is cut ends at a line, with a link to the rest.
func TestRenderBounds(t *testing.T) {
	huge := strings.Repeat("a line of notes that goes on\n", 10<<20/29) // 10 MB
	release := func(tag, body string) Release {
		return Release{Tag: tag, URL: "https://github.com/acme/agent/releases/tag/" + tag, Body: body}
	}
	for _, tc := range []struct {
		name     string
		changes  []Change
		budget   int
		max      int
		contains []string
		absent   []string
	}{{
		name:     "10 MB body cut at 64 KiB with its link",
		changes:  []Change{{Title: "a", Releases: []Release{release("v2.0.0", huge)}}},
		budget:   65536,
		max:      MaxChangeBytes,
		contains: []string{"_Notes cut at 64 KiB (0 of 1 releases shown in full); the rest: https://github.com/acme/agent/releases/tag/v2.0.0._"},
	}, {
		name: "second change cut by the budget",
		changes: []Change{
			{Title: "a", Releases: []Release{release("v2.0.0", strings.Repeat("x\n", 5000))}},
			{Title: "b", Releases: []Release{release("v1.1.0", "short"), release("v1.0.1", huge)}},
		},
		budget:   30000,
		max:      30000,
		contains: []string{"> short\n", "(1 of 2 releases shown in full); the rest: https://github.com/acme/agent/releases/tag/v1.0.1._"},
	}, {
		name: "no room left: the change is named, not rendered",
		changes: []Change{
			{Title: "a", Releases: []Release{release("v2.0.0", strings.Repeat("x\n", 20000))}},
			{Title: "b", Releases: []Release{release("v1.1.0", "short")}},
		},
		budget:   20000,
		max:      20000,
		contains: []string{"Release notes of b left out: the body is full.\n"},
		absent:   []string{"> short"},
	}, {
		name:     "small notes whole, newest first",
		changes:  []Change{{Title: "a", Releases: []Release{release("v1.2.0", "two"), release("v1.1.0", "one")}}},
		budget:   65536,
		max:      65536,
		contains: []string{"**[v1.2.0](https://github.com/acme/agent/releases/tag/v1.2.0)**\n\n> two\n\n**[v1.1.0](https://github.com/acme/agent/releases/tag/v1.1.0)**\n\n> one\n"},
		absent:   []string{"cut"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			out := Render(tc.changes, tc.budget)
			if len(out) > tc.max {
				t.Errorf("%d bytes, more than %d", len(out), tc.max)
			}
			for _, s := range tc.contains {
				if !strings.Contains(out, s) {
					t.Errorf("lacks %q:\n%.2000s", s, out)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(out, s) {
					t.Errorf("has %q", s)
				}
			}
		})
	}
}

// TestRenderMissing: a change without notes says why, and keeps its links
// and what uprev checked.
func TestRenderMissing(t *testing.T) {
	out := Render([]Change{{
		Title: "apps/agent: 1.0.0 --> 1.1.0", Source: "https://github.com/acme/agent",
		CompareURL: "https://github.com/acme/agent/compare/aaaaaaa...bbbbbbb",
		Missing:    "listing the releases: HTTP 500 from @evil",
		Checked:    []string{"First seen: 2026-11-28T08:00:00Z (3 days ago)"},
	}}, 65536)
	want := "**apps/agent: 1.0.0 --> 1.1.0**\n\n" +
		"- First seen: 2026-11-28T08:00:00Z (3 days ago)\n" +
		"- Source: https://github.com/acme/agent\n" +
		"- Compare: https://github.com/acme/agent/compare/aaaaaaa...bbbbbbb\n" +
		"- No release notes: listing the releases: HTTP 500 from @\u200bevil.\n\n"
	if out != want {
		t.Errorf("got\n%q\nwant\n%q", out, want)
	}
}

// TestCompareURL: a compare link is made only of a repository address and
// two commit hashes.
func TestCompareURL(t *testing.T) {
	for _, tc := range []struct{ source, old, new, want string }{
		{"https://github.com/acme/agent", "0123abcd", "89abcdef", "https://github.com/acme/agent/compare/0123abcd...89abcdef"},
		{"https://github.com/acme/agent.git", "0123abcd", "89abcdef", "https://github.com/acme/agent/compare/0123abcd...89abcdef"},
		{"https://github.com/acme/agent", "", "89abcdef", ""},
		{"https://github.com/acme/agent", "main)[x](https://evil", "89abcdef", ""},
		{"javascript:alert(1)//github.com/a/b", "0123abcd", "89abcdef", ""},
		{"https://github.com/acme", "0123abcd", "89abcdef", ""},
	} {
		if got := CompareURL(tc.source, tc.old, tc.new); got != tc.want {
			t.Errorf("CompareURL(%q, %q, %q) = %q, want %q", tc.source, tc.old, tc.new, got, tc.want)
		}
	}
}
