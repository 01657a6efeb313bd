package plan

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/uprev-dev/uprev/internal/guard"
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
	// Input is what the guard decides by, as for the controller: the
	// policies by key, the holds found in the checkout's history (see
	// ReadHolds), the holds released and whether downgrades are allowed.
	guard.Input
	// Assets are the URLs and hashes of the pinned assets of the
	// ReleaseSources among the policies (see ListSources), which their
	// :url: and :sha256: markers write.
	Assets map[update.AssetKey]string
	// Gated are the versions release gates hold back (see ListGated),
	// shown as they are.
	Gated []Gated
}

// Entry is one line of a plan: a change, or a refused change, in one file.
type Entry struct {
	// File is the file's path relative to the checkout root.
	File string
	// Policy is the policy the markers follow.
	Policy update.PolicyKey
	// Image is the image (or chart) name; for a ReleaseSource, its key
	// (ReleaseSource/namespace/name).
	Image string
	// Old and New are the versions before and after, as in a commit
	// trailer: tags, or tag@digest when only the digest changes.
	Old, New string
	// Digest is the digest written, empty when the markers write none.
	Digest string
	// Refusal is the rule that refused the change, zero for a change.
	Refusal guard.RefusalKind
}

// Plan is what the next run would do.
type Plan struct {
	// Changes are the changes the run would make, one per file, policy and
	// version, in file order.
	Changes []Entry
	// Held are the holds in force: reverted versions the policies select,
	// not released.
	Held []guard.Hold
	// Refused are the changes the run would not make, with the rule that
	// refused them.
	Refused []Entry
	// Gated are the versions release gates hold back from the policies.
	Gated []Gated
	// Result is the full dry-run result, with unresolved markers and file
	// errors.
	Result update.Result
}

// Compute runs the marker rewrite on in.Root as a dry run and returns what
// it would change. The error is non-nil only when the run could not go on
// (see update.RewriteMarkers); files with errors are in Plan.Result.
//
// The rules are the controller's: the plan makes them with guard.New from
// in.Input and rewrites with their Check, as a run does.
func Compute(ctx context.Context, in Input) (*Plan, error) {
	rules := guard.New(in.Input)
	res, err := update.RewriteMarkers(ctx, in.Root, in.Path, update.Options{
		Policies:         rules.Refs(),
		Assets:           in.Assets,
		DefaultNamespace: in.DefaultNamespace,
		Guard:            rules.Check,
		DryRun:           true,
	})
	if err != nil {
		return nil, fmt.Errorf("computing changes under %s: %w", in.Path, err)
	}
	p := &Plan{Held: rules.Held(), Result: res, Gated: in.Gated}
	for _, c := range res.Changes {
		p.Changes = appendEntry(p.Changes, entryOf(c, 0))
	}
	for _, r := range res.Refused {
		p.Refused = appendEntry(p.Refused, entryOf(r.Change, guard.KindOf(r.Reason)))
	}
	return p, nil
}

// entryOf summarises change c for its file.
func entryOf(c update.Change, refusal guard.RefusalKind) Entry {
	oldVersion, newVersion := update.PolicyUpdate{Policy: c.Policy, Old: c.Old, New: c.New}.Versions()
	image := c.Latest.Image
	switch {
	case c.Policy.Kind == update.SourceKind:
		// A source's values (its version, its assets' URLs and hashes)
		// make one line per file and version.
		image = c.Policy.String()
	case image == "":
		image = c.New.Image
	}
	digest := c.New.Digest
	if strings.HasSuffix(newVersion, "@"+digest) {
		digest = ""
	}
	return Entry{File: c.File, Policy: c.Policy, Image: image, Old: oldVersion, New: newVersion, Digest: digest, Refusal: refusal}
}

// appendEntry appends e unless entries holds it already: the markers of
// split fields (a tag: and a digest:) make one entry.
func appendEntry(entries []Entry, e Entry) []Entry {
	if slices.Contains(entries, e) {
		return entries
	}
	return append(entries, e)
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
// then refused changes, then what release gates hold back.
//
//	clusters/prod/agent.yaml: ghcr.io/acme/agent 1.4.1 --> 1.4.2 (sha256:…)
//	held: fleet/agent 1.4.2 (reverted in 9ab2c3d4e5)
//	refused: clusters/prod/agent.yaml: fleet/agent 2.0.0 --> 1.9.0 (downgrade)
//	gated: fleet/agent 1.5.1 (promotion at ReleaseGate prod: eu-staging runs 1.4.2)
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
		lines = append(lines, fmt.Sprintf("refused: %s: %s %s --> %s (%s)", e.File, e.Policy, e.Old, e.New, e.Refusal))
	}
	for _, g := range p.Gated {
		lines = append(lines, g.line())
	}
	return lines
}

// NoChanges is the line Write starts with when the plan changes nothing
// and no file had errors.
const NoChanges = "no changes"

// Write writes Lines to w, each ended by a newline, after the line
// NoChanges when nothing would change and no file had errors, so that an
// empty plan still says so.
func (p *Plan) Write(w io.Writer) error {
	lines := p.Lines()
	if len(p.Changes) == 0 && len(p.Result.FileErrors) == 0 {
		lines = append([]string{NoChanges}, lines...)
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
