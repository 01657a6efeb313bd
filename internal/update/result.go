package update

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Guard decides whether a change may be written: it returns nil to allow
// it, or the reason it refuses it. The caller uses it to refuse downgrades
// (comparing change.Old.Tag and change.New.Tag by the policy's ordering) and
// to honour holds (change.Policy held at change.Latest.Tag); internal/guard
// provides one whose reasons are typed refusals. A refused change is listed
// in Result.Refused with the reason and not written. A refusal holds for
// every change of the same policy in the same YAML document, so that split
// fields (a Helm values tag: and digest:) never end up from different
// versions.
type Guard func(change Change) error

// Change is one marked value that a run changes.
type Change struct {
	// File is the file's path relative to the checkout root, with forward
	// slashes.
	File string
	// Line is the 1-based line of the value in the original file.
	Line int
	// Object is the Kubernetes object whose YAML document holds the value.
	Object Object
	// Policy is the policy the marker follows.
	Policy PolicyKey
	// Kind is the part of the reference the marker sets.
	Kind MarkerKind
	// OldValue is the value before the run.
	OldValue string
	// NewValue is the value written.
	NewValue string
	// Old is what the YAML document held for this policy before the run:
	// the parts this value carries (all three for a bare marker's
	// name:tag@digest, one for a :name, :tag or :digest marker), completed
	// from other markers of the same policy in the same document (the tag:
	// next to a Helm values digest:). Parts the document does not hold are
	// empty.
	Old Ref
	// New is the same parts after the run.
	New Ref
	// Latest is the policy's latest reference the change moves to, in
	// full; a Guard checking holds compares its Tag.
	Latest Ref
}

// Object identifies a Kubernetes object by the apiVersion, kind and
// metadata of its YAML document; fields the document lacks (a
// kustomization.yaml has no name) are empty.
type Object struct {
	APIVersion, Kind, Namespace, Name string
}

// String describes the change as file:line policy old --> new; an empty
// value shows as "".
func (c Change) String() string {
	return fmt.Sprintf("%s:%d %s %s --> %s", c.File, c.Line, c.Policy, orQuotes(c.OldValue), orQuotes(c.NewValue))
}

// orQuotes returns s, or "" in quotes when s is empty.
func orQuotes(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// Refusal is a change the Guard refused; it was not written.
type Refusal struct {
	// Change is the change that was not made.
	Change Change
	// Reason is the Guard's reason, or, for a change refused because another
	// change of the same policy in the same document was refused, that
	// change's reason.
	Reason error
}

// Unresolved is a valid marker that was left alone because there was
// nothing to write: its policy is not among the ones given, or the policy
// does not report the part the marker sets (a :digest marker on a policy
// without digest).
type Unresolved struct {
	// File is the file's path relative to the checkout root.
	File string
	// Line is the 1-based line of the marked value.
	Line int
	// Marker is the marker found there.
	Marker Marker
	// Reason says why nothing was written.
	Reason string
}

// FileError is a file that was left untouched because it could not be read,
// parsed, or rewritten, or because it holds an invalid marker.
type FileError struct {
	// File is the file's path relative to the checkout root.
	File string
	// Line is the 1-based line the error is about, 0 when it is about the
	// whole file.
	Line int
	// Err is the cause; it wraps ErrInvalidMarker for marker errors.
	Err error
}

// Error returns file:line: cause.
func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

// Unwrap returns the cause.
func (e *FileError) Unwrap() error {
	return e.Err
}

// Result is what a run did, in file order and then line order.
type Result struct {
	// Changes are the values changed (written, unless Options.DryRun).
	Changes []Change
	// Refused are the changes the Guard refused.
	Refused []Refusal
	// Unresolved are the markers left alone for lack of a value.
	Unresolved []Unresolved
	// FileErrors are the files left untouched because of an error.
	FileErrors []*FileError
}

// Changed reports whether any value changed.
func (r Result) Changed() bool {
	return len(r.Changes) > 0
}

// Files returns the changed files, sorted, each once.
func (r Result) Files() []string {
	files := make([]string, 0, len(r.Changes))
	for _, c := range r.Changes {
		files = append(files, c.File)
	}
	slices.Sort(files)
	return slices.Compact(files)
}

// Err returns the file errors joined into one error, nil if there were none.
func (r Result) Err() error {
	errs := make([]error, len(r.FileErrors))
	for i, e := range r.FileErrors {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// PolicyUpdate summarises the changes a run made for one policy from one
// old version; a commit message lists one line per PolicyUpdate.
type PolicyUpdate struct {
	// Policy is the policy.
	Policy PolicyKey
	// Old is the version the files held (see Change.Old).
	Old Ref
	// New is the version written (see Change.New).
	New Ref
}

// Versions returns the old and new version for display: the tags when they
// differ, tag@digest when only the digest changed, else the image names
// (a ReleaseSource's version, when only an asset's value changed).
func (u PolicyUpdate) Versions() (oldVersion, newVersion string) {
	switch {
	case u.Old.Tag != u.New.Tag, u.Policy.Kind == SourceKind:
		return u.Old.Tag, u.New.Tag
	case u.Old.Digest != u.New.Digest:
		return withDigest(u.Old), withDigest(u.New)
	default:
		return u.Old.Image, u.New.Image
	}
}

// withDigest formats tag@digest, or whichever of the two is not empty.
func withDigest(r Ref) string {
	switch {
	case r.Tag == "":
		return r.Digest
	case r.Digest == "":
		return r.Tag
	}
	return r.Tag + "@" + r.Digest
}

// String returns namespace/name old --> new, the form of the commit
// trailer Uprev-Update.
func (u PolicyUpdate) String() string {
	oldVersion, newVersion := u.Versions()
	return fmt.Sprintf("%s %s --> %s", u.Policy, oldVersion, newVersion)
}

// Updates returns one PolicyUpdate per policy and distinct old/new version
// among the changes, sorted by policy and then old version.
func (r Result) Updates() []PolicyUpdate {
	var updates []PolicyUpdate
	for _, c := range r.Changes {
		u := PolicyUpdate{Policy: c.Policy, Old: c.Old, New: c.New}
		if !slices.Contains(updates, u) {
			updates = append(updates, u)
		}
	}
	slices.SortFunc(updates, func(a, b PolicyUpdate) int {
		return cmp.Or(
			cmp.Compare(a.Policy.Namespace, b.Policy.Namespace),
			cmp.Compare(a.Policy.Name, b.Policy.Name),
			compareRefs(a.Old, b.Old),
			compareRefs(a.New, b.New),
		)
	})
	return updates
}

// compareRefs orders references by tag, digest and image.
func compareRefs(a, b Ref) int {
	return cmp.Or(cmp.Compare(a.Tag, b.Tag), cmp.Compare(a.Digest, b.Digest), cmp.Compare(a.Image, b.Image))
}
