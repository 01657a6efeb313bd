package forge

import (
	"fmt"
	"strings"
)

// Description is what a pull request's body tells a reviewer about the
// push it describes.
type Description struct {
	// Automation is the automation as `<kind> <namespace>/<name>`.
	Automation string
	// Head is the pushed commit the body describes.
	Head string
	// Changes are the values the pushed commit changed, file by file;
	// empty when they are not known (a retry after the push).
	Changes []Change
	// Updates are the policy moves of all the pull request's commits, from
	// the first old version to the last new one (see FoldUpdates), as their
	// trailers state them.
	Updates []Update
	// Commits is the number of automation commits the pull request holds.
	Commits int
	// Warnings are what a reviewer must see before merging, such as a
	// CRD version removed; Markdown, made safe by the caller.
	Warnings []string
	// Notes is the Markdown of the updates' release notes, already made
	// inert and bounded (internal/notes); empty when there are none.
	Notes string
	// CRDs are the CRD bundle lines of the commit message.
	CRDs []string
	// Held are the versions not written because a person reverted or
	// rejected them.
	Held []Held
	// RefusedDowngrades are changes not made because they would lower a
	// version.
	RefusedDowngrades []RefusedDowngrade
}

// Change is one value a commit changed.
type Change struct {
	// File is the file's path in the repository.
	File string
	// Policy is the ImagePolicy as namespace/name.
	Policy string
	// Old and New are the values, as written in the file (image:tag@digest
	// where the marker sets all three).
	Old, New string
}

// Update is one policy's move, as a commit trailer states it.
type Update struct {
	// Policy is the ImagePolicy as namespace/name.
	Policy string
	// Old and New are the versions.
	Old, New string
}

// Held is a version the automation holds back.
type Held struct {
	// Policy is the ImagePolicy as namespace/name.
	Policy string
	// Version is the held version.
	Version string
	// RevertedIn is the revert commit, or the commit that records the
	// rejection.
	RevertedIn string
	// RejectedBy is who made the rejection's commit, as inline Markdown
	// made inert by the caller; empty for a revert.
	RejectedBy string
	// Reason is the rejection's reason, as inline Markdown made inert by
	// the caller; empty for a revert.
	Reason string
}

// RefusedDowngrade is a change refused because it would lower a version.
type RefusedDowngrade struct {
	// Policy is the ImagePolicy as namespace/name.
	Policy string
	// File is the file's path in the repository.
	File string
	// Current is the version in Git; Selected the lower one the policy selects.
	Current, Selected string
}

// Body writes the Markdown body of a pull request: the warnings, every
// change as `old --> new` (digests included where the files carry them),
// the release notes, the CRD lines, the held versions and the refused
// downgrades.
func Body(d Description) string {
	var b strings.Builder
	section := func(title string) {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### %s\n\n", title)
	}
	if len(d.Warnings) > 0 {
		section("Warnings")
		for _, w := range d.Warnings {
			fmt.Fprintf(&b, "- **Warning:** %s\n", w)
		}
	}
	// The pushed commit's changes, file by file; when the pull request
	// holds earlier commits too, all its updates, policy by policy.
	switch {
	case len(d.Changes) > 0 && d.Commits > 1:
		section("Changes in the last push")
		writeChanges(&b, d.Changes)
		if len(d.Updates) > 0 {
			section(fmt.Sprintf("All updates in this pull request (%d commits)", d.Commits))
			writeUpdates(&b, d.Updates)
		}
	case len(d.Changes) > 0:
		section("Changes")
		writeChanges(&b, d.Changes)
	case len(d.Updates) > 0:
		section("Changes")
		writeUpdates(&b, d.Updates)
	}
	if d.Notes != "" {
		section("Release notes")
		b.WriteString(d.Notes)
	}
	if len(d.CRDs) > 0 {
		section("CRDs")
		for _, line := range d.CRDs {
			fmt.Fprintf(&b, "- %s\n", line)
		}
	}
	if len(d.Held) > 0 {
		section("Held versions")
		b.WriteString("Not written because a person reverted or rejected them; `uprev release-hold`, or the annotation `uprev.dev/release-holds`, lifts a hold.\n\n")
		for _, h := range d.Held {
			writeHeld(&b, h)
		}
	}
	if len(d.RefusedDowngrades) > 0 {
		section("Refused downgrades")
		b.WriteString("Not written because Git holds a higher version; `spec.allowDowngrade` allows them.\n\n")
		for _, r := range d.RefusedDowngrades {
			fmt.Fprintf(&b, "- `%s` (%s): stays at `%s`, the policy selects `%s`\n", r.File, r.Policy, r.Current, r.Selected)
		}
	}
	if b.Len() == 0 {
		b.WriteString("No changes to list.\n")
	}
	fmt.Fprintf(&b, "\n---\nOpened by uprev for %s", d.Automation)
	if d.Head != "" {
		fmt.Fprintf(&b, " at %s", short(d.Head))
	}
	b.WriteString(". Each push to the branch updates this description; once merged or closed, the next change opens a new pull request.\n")
	return b.String()
}

func writeChanges(b *strings.Builder, changes []Change) {
	for _, c := range changes {
		fmt.Fprintf(b, "- `%s` (%s): `%s` --> `%s`\n", c.File, c.Policy, orEmpty(c.Old), orEmpty(c.New))
	}
}

// writeHeld writes the line of a held version: the revert, or who
// rejected it, in which commit, and why.
func writeHeld(b *strings.Builder, h Held) {
	if h.Reason == "" {
		fmt.Fprintf(b, "- %s `%s`, reverted in %s\n", h.Policy, h.Version, short(h.RevertedIn))
		return
	}
	fmt.Fprintf(b, "- %s `%s`, rejected by %s in %s, reason: %s\n", h.Policy, h.Version, h.RejectedBy, short(h.RevertedIn), h.Reason)
}

func writeUpdates(b *strings.Builder, updates []Update) {
	for _, u := range updates {
		fmt.Fprintf(b, "- %s: `%s` --> `%s`\n", u.Policy, orEmpty(u.Old), orEmpty(u.New))
	}
}

// FoldUpdates folds the policy moves of several commits, oldest commit
// first, into one move per policy: from the first old version to the last
// new one, in the order policies first moved. A policy that came back to
// where it started is left out.
func FoldUpdates(oldestFirst []Update) []Update {
	var order []string
	folded := map[string]Update{}
	for _, u := range oldestFirst {
		f, seen := folded[u.Policy]
		if !seen {
			order = append(order, u.Policy)
			f = Update{Policy: u.Policy, Old: u.Old}
		}
		f.New = u.New
		folded[u.Policy] = f
	}
	out := make([]Update, 0, len(order))
	for _, p := range order {
		if f := folded[p]; f.Old != f.New {
			out = append(out, f)
		}
	}
	return out
}

// orEmpty shows an empty value as "".
func orEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// short abbreviates a commit SHA.
func short(sha string) string {
	return sha[:min(len(sha), 10)]
}
