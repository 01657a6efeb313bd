// Package notes finds and renders what a pull request tells a reviewer
// about each change: the release notes of the versions between the old
// and the new one, fetched from the source's forge through the outbound
// layer, and a compare link.
//
// Release notes are written by whoever publishes the release: untrusted
// text. Render keeps them inert in a pull request's Markdown: they cannot
// mention people or teams, reference issues, open HTML or close the block
// they sit in, or put a line in the body that reads as uprev's own.
package notes

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxChangeBytes bounds the rendered notes of one change (64 KiB).
const MaxChangeBytes = 64 << 10

// MaxBodyChars is the longest pull request body the forges take: GitHub's
// 65,536 characters, the least of the three.
const MaxBodyChars = 65536

// Release is one release's notes, as the forge gave them.
type Release struct {
	// Tag is the release's tag.
	Tag string
	// Name is its title, which may be empty.
	Name string
	// URL is its web page.
	URL string
	// Body is its notes, in Markdown: untrusted.
	Body string
}

// Change is what the body says about one change.
type Change struct {
	// Title names the change, such as `apps/agent: 1.0.0 --> 1.1.0`; it is
	// uprev's own text.
	Title string
	// Source is the web address of the source repository, when known.
	Source string
	// Home is the project's home page (a Helm chart's home), when known.
	Home string
	// MoreSources are other addresses of its source code (a Helm chart's
	// sources after the first, which is Source).
	MoreSources []string
	// Releases are the releases between the old and the new version,
	// newest first.
	Releases []Release
	// CompareURL compares the old version's revision with the new one's.
	CompareURL string
	// Missing says why there are no notes, when there are none.
	Missing string
	// Checked are uprev's own lines on what it checked of the new
	// version: when it was first seen, the signature and the promotion
	// its release gates accepted, the newer versions they refused. They
	// may quote untrusted text (a certificate's identity, an
	// attestation's builder), so they are rendered inert too.
	Checked []string
}

// Bounds of what uprev says it checked of one change, so that the
// release notes keep their room (MaxChangeBytes).
const (
	maxSources      = 8
	maxChecked      = 16
	maxCheckedBytes = 512
)

// cutMarker is the reserve kept for the line that says the notes were cut.
const cutMarker = 512

// Render writes the Markdown of changes, one collapsed block each, within
// budget bytes in all (a forge counts characters; bytes are never fewer),
// and each change within MaxChangeBytes. Notes that do not fit are cut at
// a line, and the cut says where the rest is.
func Render(changes []Change, budget int) string {
	var b strings.Builder
	for _, c := range changes {
		limit := min(MaxChangeBytes, budget-b.Len())
		if limit < cutMarker {
			fmt.Fprintf(&b, "Release notes of %s left out: the body is full.\n", c.Title)
			continue
		}
		b.WriteString(renderChange(c, limit))
	}
	return b.String()
}

// renderChange writes one change within limit bytes: its title, what
// uprev checked of it, its source and compare links in sight; its
// release notes in a collapsed block.
func renderChange(c Change, limit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s**\n\n", Inline(c.Title))
	for i, line := range c.Checked {
		if i == maxChecked {
			fmt.Fprintf(&b, "- and %d more checks\n", len(c.Checked)-i)
			break
		}
		fmt.Fprintf(&b, "- %s\n", cutAtLine(Inline(line), maxCheckedBytes))
	}
	if home := webURL(c.Home); home != "" && home != c.Source {
		fmt.Fprintf(&b, "- Home: %s\n", home)
	}
	for i, s := range append([]string{c.Source}, c.MoreSources...) {
		if src := webURL(s); src != "" && i < maxSources && (i == 0 || s != c.Source) {
			fmt.Fprintf(&b, "- Source: %s\n", src)
		}
	}
	if cmp := webURL(c.CompareURL); cmp != "" {
		fmt.Fprintf(&b, "- Compare: %s\n", cmp)
	}
	if len(c.Releases) == 0 {
		missing := c.Missing
		if missing == "" {
			missing = "no release between the two versions"
		}
		fmt.Fprintf(&b, "- No release notes: %s.\n\n", cutAtLine(Inline(missing), maxCheckedBytes))
		return b.String()
	}
	fmt.Fprintf(&b, "\n<details><summary>Release notes: %s</summary>\n", releaseCount(len(c.Releases)))
	const end = "\n</details>\n\n"
	for i, r := range c.Releases {
		block := renderRelease(r)
		room := limit - b.Len() - len(end) - cutMarker
		if len(block) <= room {
			b.WriteString(block)
			continue
		}
		b.WriteString(cutAtLine(block, room))
		rest := webURL(r.URL)
		if rest == "" {
			rest = webURL(c.Source)
		}
		fmt.Fprintf(&b, "\n\n_Notes cut at %d KiB (%d of %d releases shown in full)", limit>>10, i, len(c.Releases))
		if rest != "" {
			fmt.Fprintf(&b, "; the rest: %s", rest)
		}
		b.WriteString("._\n")
		break
	}
	b.WriteString(end)
	return b.String()
}

// releaseCount says how many releases a change's notes hold.
func releaseCount(n int) string {
	if n == 1 {
		return "1 release"
	}
	return fmt.Sprintf("%d releases", n)
}

// renderRelease writes a release: its heading, uprev's, then its notes
// quoted line by line.
func renderRelease(r Release) string {
	var b strings.Builder
	title := r.Tag
	if r.Name != "" && r.Name != r.Tag {
		title = r.Name + " (" + r.Tag + ")"
	}
	if u := webURL(r.URL); u != "" {
		fmt.Fprintf(&b, "\n**[%s](%s)**\n\n", linkText(title), u)
	} else {
		fmt.Fprintf(&b, "\n**%s**\n\n", Inline(title))
	}
	body := strings.TrimSpace(Sanitize(cutAtLine(r.Body, MaxChangeBytes)))
	if body == "" {
		b.WriteString("> (no notes)\n")
		return b.String()
	}
	for line := range strings.SplitSeq(body, "\n") {
		if line == "" {
			b.WriteString(">\n")
			continue
		}
		b.WriteString("> " + line + "\n")
	}
	return b.String()
}

// cutAtLine returns the longest prefix of s within n bytes that ends at a
// line, or else at a character.
func cutAtLine(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	s = s[:n]
	if i := strings.LastIndexByte(s, '\n'); i > 0 {
		return s[:i]
	}
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// zeroWidthSpace breaks a mention or an issue reference without showing.
const zeroWidthSpace = "\u200b"

// Sanitize makes untrusted Markdown inert: `<` and `&` are escaped, so
// that no HTML tag opens or closes (`</details>`) and no character
// reference turns into one (`&#64;`); a zero-width space follows each `@`
// before a name and each `#` before a number, so that nobody is mentioned
// and no issue of the wrong repository is referenced (nor by GH-<n>); carriage
// returns, other control characters and bidirectional overrides are
// dropped. Line structure is kept; Render quotes every line.
func Sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	runes := []rune(s)
	for i, r := range runes {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == utf8.RuneError, unicode.IsControl(r), isBidi(r):
		case r == '<':
			b.WriteString("&lt;")
		case r == '&':
			b.WriteString("&amp;")
		case i+1 < len(runes) && ((r == '@' && mentionable(runes[i+1])) || (r == '#' && unicode.IsDigit(runes[i+1]))):
			b.WriteRune(r)
			b.WriteString(zeroWidthSpace)
		default:
			b.WriteRune(r)
		}
	}
	return ghReference.ReplaceAllString(b.String(), "${1}\u200b-${2}")
}

// ghReference is GitHub's GH-<number> issue reference.
var ghReference = regexp.MustCompile(`(?i)\b(gh)-([0-9])`)

// mentionable says whether r may start a user, team or issue reference.
func mentionable(r rune) bool {
	return r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_')
}

// isBidi says whether r is a bidirectional formatting character, which
// can make text read differently from what it is.
func isBidi(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}

// Inline is untrusted text for one line of Markdown: sanitized (see
// Sanitize), whitespace and newlines folded to single spaces.
func Inline(s string) string {
	return strings.Join(strings.Fields(Sanitize(s)), " ")
}

// linkText is inline text safe inside [ ].
func linkText(s string) string {
	return strings.NewReplacer("[", `\[`, "]", `\]`).Replace(Inline(s))
}

// webURL returns u when it is an absolute http or https address without
// spaces or Markdown punctuation that could end a link, or else "".
func webURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.User != nil {
		return ""
	}
	if strings.ContainsAny(u, " \t\n<>()[]\"'`") {
		return ""
	}
	return u
}
