package notes

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// changelogPath is the file read when a repository has no release between
// two versions: Keep a Changelog's, and most projects'.
const changelogPath = "CHANGELOG.md"

// maxChangelogBytes bounds the part of a changelog that is parsed.
const maxChangelogBytes = 1 << 20

// changelog returns the sections of the repository's CHANGELOG.md, on its
// default branch, whose headings name a version after old up to new, in
// the file's order (newest first, as changelogs are written), each as a
// Release that links to the repository.
func (f *Fetcher) changelog(ctx context.Context, forge forge, source, old, new string) ([]Release, error) {
	data, err := forge.file(ctx, changelogPath)
	f.count()
	if err != nil {
		return nil, fmt.Errorf("no release between the two versions, and no %s: %w", changelogPath, err)
	}
	out := changelogSections(string(data[:min(len(data), maxChangelogBytes)]), newSpan(old, new))
	for i := range out {
		out[i].URL = source
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no release between the two versions, nor a section of %s", changelogPath)
	}
	return out, nil
}

// changelogHeading is a Markdown heading that names a version: "## [1.2.0]
// - 2026-11-01", "## v1.2.0", "# 1.2.0 (2026-11-01)".
var changelogHeading = regexp.MustCompile(`^(#{1,4})\s+\[?v?(\d+\.\d+(?:\.\d+)?(?:-[0-9A-Za-z.-]+)?)\]?`)

// changelogSections splits a changelog at its version headings and keeps
// the sections in span, each ending where a heading of its level or
// higher begins.
func changelogSections(text string, span *span) []Release {
	var out []Release
	var cur *Release
	level := 0
	flush := func() {
		if cur != nil {
			cur.Body = cutAtLine(strings.TrimSpace(cur.Body), MaxChangeBytes)
			out = append(out, *cur)
			cur = nil
		}
	}
	for line := range strings.SplitSeq(text, "\n") {
		m := changelogHeading.FindStringSubmatch(line)
		hashes := len(line) - len(strings.TrimLeft(line, "#"))
		switch {
		case m != nil:
			flush()
			level = len(m[1])
			if in, _ := span.place(m[2]); in {
				cur = &Release{Tag: m[2], Name: strings.TrimSpace(strings.TrimLeft(line, "# "))}
			}
		case cur != nil && hashes > 0 && hashes <= level && strings.HasPrefix(line[hashes:], " "):
			flush()
		case cur != nil:
			cur.Body += line + "\n"
		}
	}
	flush()
	return out
}
