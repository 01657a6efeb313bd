package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/plan"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/source"
)

// notesTimeout bounds the finding of all the notes of a plan, as the
// controller's bounds those of a pull request.
const notesTimeout = 20 * time.Second

// writeNotes writes, after the plan, what the pull request body would
// say of its updates (--notes): the gates' verdicts from o.gates and the
// release notes, read anonymously from the registries, from the public
// APIs of github.com (o.githubAPI, with $GITHUB_TOKEN when set) and
// gitlab.com, and from the servers of the ReleaseSources o.sources
// (without their Secrets), through the outbound layer.
func (o *planOptions) writeNotes(ctx context.Context, p *plan.Plan, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, notesTimeout)
	defer cancel()
	scanner := registry.NewScanner(registry.ScannerOptions{})
	md := p.Notes(ctx, plan.NotesInput{
		Fetcher: notes.NewFetcher(outbound.Denylist{}.Client(notesTimeout), nil),
		Registry: func(ctx context.Context, _ string) (notes.Registry, error) {
			return scanner.Client(ctx, registry.Access{})
		},
		GitHub:       notes.API{Kind: notes.GitHub, URL: o.githubAPI, Token: os.Getenv("GITHUB_TOKEN")},
		Gates:        o.gates,
		Sources:      o.sources,
		SourceReader: source.NewClient(source.Options{}),
	})
	if md == "" {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\n%s", md); err != nil {
		return fmt.Errorf("writing the notes: %w", err)
	}
	return nil
}
