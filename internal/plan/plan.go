package plan

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/policy"
	"github.com/uprev-dev/uprev/internal/update"
)

// Exit codes of `uprev plan`, for CI jobs.
const (
	// ExitNoChange means the next run would change nothing.
	ExitNoChange = 0
	// ExitError means the plan could not be computed, or some files could
	// not be read or hold invalid markers.
	ExitError = 1
	// ExitChanges means the next run would change at least one value.
	ExitChanges = 2
)

// Reasons of the refusals a plan lists.
const (
	// ReasonHeld marks a change to a version a revert put on hold.
	ReasonHeld = "held"
	// ReasonDowngrade marks a change to a lower version than Git holds.
	ReasonDowngrade = "downgrade"
)

// Ordering is how a policy ranks versions: its spec.policy and
// spec.filterTags. The guard uses it to recognise downgrades.
type Ordering struct {
	// Policy is the policy choice (semver, alphabetical or numerical).
	Policy imagev1.ImagePolicyChoice
	// FilterTags, when set, extracts the part of each tag to order by.
	FilterTags *imagev1.TagFilter
}

// Policy is one policy a plan may write: its latest reference and, when
// known, its ordering.
type Policy struct {
	// Ref is the policy's latest reference (status.latestRef).
	Ref update.Ref
	// Ordering ranks versions for downgrade checks; nil skips the check for
	// this policy.
	Ordering *Ordering
}

// Input is everything a plan is computed from.
type Input struct {
	// Root is the checkout's root directory.
	Root string
	// Path is the directory under Root whose files an automation updates
	// (spec.update.path); empty means the whole checkout.
	Path string
	// DefaultNamespace is the namespace of markers that name a policy
	// without one: the automation's namespace.
	DefaultNamespace string
	// Policies are the policies by key.
	Policies map[update.PolicyKey]Policy
	// Holds are the holds found in the checkout's history (see ReadHolds);
	// only those on a policy's latest version are in force.
	Holds []gitrepo.Hold
	// AllowDowngrade lets changes to lower versions through, as
	// spec.allowDowngrade does.
	AllowDowngrade bool
}

// Entry is one line of a plan: a change, or a refused change, in one file.
type Entry struct {
	// File is the file's path relative to the checkout root.
	File string
	// Policy is the policy the markers follow.
	Policy update.PolicyKey
	// Image is the image (or chart) name.
	Image string
	// Old and New are the versions before and after, as in a commit
	// trailer: tags, or tag@digest when only the digest changes.
	Old, New string
	// Digest is the digest written, empty when the markers write none.
	Digest string
	// Reason is ReasonHeld or ReasonDowngrade for a refused change.
	Reason string
}

// Plan is what the next run would do.
type Plan struct {
	// Changes are the changes the run would make, one per file, policy and
	// version, in file order.
	Changes []Entry
	// Held are the holds in force: reverted versions the policies select.
	Held []gitrepo.Hold
	// Refused are the changes the run would not make, with their reason.
	Refused []Entry
	// Result is the full dry-run result, with unresolved markers and file
	// errors.
	Result update.Result
}

// Compute runs the marker rewrite on in.Root as a dry run and returns what
// it would change. The error is non-nil only when the run could not go on
// (see update.RewriteMarkers); files with errors are in Plan.Result.
func Compute(ctx context.Context, in Input) (*Plan, error) {
	refs := make(map[update.PolicyKey]update.Ref, len(in.Policies))
	for key, p := range in.Policies {
		refs[key] = p.Ref
	}
	held := HoldsInForce(in.Holds, refs)
	res, err := update.RewriteMarkers(ctx, in.Root, in.Path, update.Options{
		Policies:         refs,
		DefaultNamespace: in.DefaultNamespace,
		Guard:            Guard(held, in.Policies, in.AllowDowngrade),
		DryRun:           true,
	})
	if err != nil {
		return nil, fmt.Errorf("computing changes under %s: %w", in.Path, err)
	}
	p := &Plan{Held: held, Result: res}
	for _, c := range res.Changes {
		p.Changes = appendEntry(p.Changes, entryOf(c, ""))
	}
	for _, r := range res.Refused {
		reason := ReasonDowngrade
		if strings.HasPrefix(r.Reason.Error(), ReasonHeld) {
			reason = ReasonHeld
		}
		p.Refused = appendEntry(p.Refused, entryOf(r.Change, reason))
	}
	return p, nil
}

// entryOf summarises change c for its file.
func entryOf(c update.Change, reason string) Entry {
	oldVersion, newVersion := update.PolicyUpdate{Policy: c.Policy, Old: c.Old, New: c.New}.Versions()
	image := c.Latest.Image
	if image == "" {
		image = c.New.Image
	}
	digest := c.New.Digest
	if strings.HasSuffix(newVersion, "@"+digest) {
		digest = ""
	}
	return Entry{File: c.File, Policy: c.Policy, Image: image, Old: oldVersion, New: newVersion, Digest: digest, Reason: reason}
}

// appendEntry appends e unless entries holds it already: the markers of
// split fields (a tag: and a digest:) make one entry.
func appendEntry(entries []Entry, e Entry) []Entry {
	if slices.Contains(entries, e) {
		return entries
	}
	return append(entries, e)
}

// HoldsInForce keeps the holds whose policy is among refs and selects the
// held version, as the controller does; other holds no longer matter.
func HoldsInForce(holds []gitrepo.Hold, refs map[update.PolicyKey]update.Ref) []gitrepo.Hold {
	var inForce []gitrepo.Hold
	for _, h := range holds {
		ref, ok := refs[parseKey(h.Policy)]
		if ok && holdsRef(h, ref) {
			inForce = append(inForce, h)
		}
	}
	return inForce
}

// Guard refuses changes to held versions and, unless allowDowngrade,
// changes the policy's ordering ranks below the version in Git. Its reasons
// are the controller's. Tags the ordering cannot compare are allowed,
// as the controller allows them.
// The UpdateAutomation controller uses the same guard, so a plan shows
// what a run would do.
func Guard(holds []gitrepo.Hold, policies map[update.PolicyKey]Policy, allowDowngrade bool) update.Guard {
	return func(c update.Change) error {
		for _, h := range holds {
			if parseKey(h.Policy) == c.Policy && holdsRef(h, c.Latest) {
				return fmt.Errorf("held: %s was reverted in %s", h.Version, shortSHA(h.RevertedIn))
			}
		}
		if allowDowngrade || c.Old.Tag == "" || c.Old.Tag == c.New.Tag {
			return nil
		}
		o := policies[c.Policy].Ordering
		if o == nil {
			return nil
		}
		order, err := policy.Compare(o.Policy, o.FilterTags, c.Old.Tag, c.New.Tag)
		if err == nil && order > 0 {
			return fmt.Errorf("downgrade from %s to %s refused", c.Old.Tag, c.New.Tag)
		}
		return nil
	}
}

// holdsRef reports whether hold h is on ref's tag (or tag@digest, the form
// of a digest-only update).
func holdsRef(h gitrepo.Hold, ref update.Ref) bool {
	return h.Version == ref.Tag || (ref.Digest != "" && h.Version == ref.Tag+"@"+ref.Digest)
}

// parseKey parses `namespace/name`.
func parseKey(s string) update.PolicyKey {
	ns, name, _ := strings.Cut(s, "/")
	return update.PolicyKey{Namespace: ns, Name: name}
}

// shortSHA abbreviates a commit SHA, as the controller does.
func shortSHA(sha string) string {
	return sha[:min(len(sha), 10)]
}

// ExitCode is the exit code of `uprev plan` for p: ExitError when files
// could not be read or hold invalid markers, ExitChanges when something
// would change, ExitNoChange otherwise.
func (p *Plan) ExitCode() int {
	switch {
	case len(p.Result.FileErrors) > 0:
		return ExitError
	case len(p.Changes) > 0:
		return ExitChanges
	default:
		return ExitNoChange
	}
}

// Lines returns the plan as text, one line per entry: changes, then holds,
// then refused changes.
//
//	clusters/prod/agent.yaml: ghcr.io/acme/agent 1.4.1 --> 1.4.2 (sha256:…)
//	held: fleet/agent 1.4.2 (reverted in 9ab2c3d4e5)
//	refused: clusters/prod/agent.yaml: fleet/agent 2.0.0 --> 1.9.0 (downgrade)
func (p *Plan) Lines() []string {
	var lines []string
	for _, e := range p.Changes {
		line := fmt.Sprintf("%s: %s %s --> %s", e.File, e.Image, e.Old, e.New)
		if e.Digest != "" {
			line += " (" + e.Digest + ")"
		}
		lines = append(lines, line)
	}
	for _, h := range p.Held {
		lines = append(lines, fmt.Sprintf("held: %s %s (reverted in %s)", h.Policy, h.Version, shortSHA(h.RevertedIn)))
	}
	for _, e := range p.Refused {
		lines = append(lines, fmt.Sprintf("refused: %s: %s %s --> %s (%s)", e.File, e.Policy, e.Old, e.New, e.Reason))
	}
	return lines
}

// Write writes Lines to w, each ended by a newline.
func (p *Plan) Write(w io.Writer) error {
	for _, l := range p.Lines() {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
