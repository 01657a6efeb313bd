package forge

import (
	"fmt"
	"strings"
)

// Description is what a pull request's body tells a reviewer about the
// push it describes.
type Description struct {
	// Automation is the automation as namespace/name.
	Automation string
	// Head is the pushed commit the body describes.
	Head string
	// Changes are the values the commit changed, file by file.
	Changes []Change
	// Updates are the policy moves, used when Changes are not known (a
	// retry after the push, read back from the commit's trailers).
	Updates []Update
	// CRDs are the CRD bundle lines of the commit message.
	CRDs []string
	// Held are the versions not written because a person reverted them.
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
	// RevertedIn is the revert commit.
	RevertedIn string
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

// Body writes the Markdown body of a pull request: every change as
// `old --> new` (digests included where the files carry them), the CRD
// lines, the held versions and the refused downgrades.
func Body(d Description) string {
	var b strings.Builder
	section := func(title string) {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### %s\n\n", title)
	}
	switch {
	case len(d.Changes) > 0:
		section("Changes")
		for _, c := range d.Changes {
			fmt.Fprintf(&b, "- `%s` (%s): `%s` --> `%s`\n", c.File, c.Policy, orEmpty(c.Old), orEmpty(c.New))
		}
	case len(d.Updates) > 0:
		section("Changes")
		for _, u := range d.Updates {
			fmt.Fprintf(&b, "- %s: `%s` --> `%s`\n", u.Policy, orEmpty(u.Old), orEmpty(u.New))
		}
	}
	if len(d.CRDs) > 0 {
		section("CRDs")
		for _, line := range d.CRDs {
			fmt.Fprintf(&b, "- %s\n", line)
		}
	}
	if len(d.Held) > 0 {
		section("Held versions")
		b.WriteString("Not written because a person reverted them; a newer version, or the annotation `uprev.dev/release-holds`, releases a hold.\n\n")
		for _, h := range d.Held {
			fmt.Fprintf(&b, "- %s `%s`, reverted in %s\n", h.Policy, h.Version, short(h.RevertedIn))
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
	fmt.Fprintf(&b, "\n---\nOpened by uprev for UpdateAutomation %s", d.Automation)
	if d.Head != "" {
		fmt.Fprintf(&b, " at %s", short(d.Head))
	}
	b.WriteString(". Each push to the branch updates this description; once merged or closed, the next change opens a new pull request.\n")
	return b.String()
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
