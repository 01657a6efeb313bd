package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/uprev-dev/uprev/internal/fleet"
)

// fleetCommand returns `uprev get fleet`: the fleet view, one row per
// component a Sync deploys and one column per cluster (docs/fleet.md). It
// shares the flags of `uprev get`, but prints the fleet's own table, not a
// list of objects.
func (o *getOptions) fleetCommand(opts Options) *cobra.Command {
	return &cobra.Command{
		Use:   "fleet",
		Short: "Show which version of each component every cluster runs, and which are behind, held or waiting",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.fleet(cmd.Context(), opts)
		},
	}
}

// fleet reads the fleet view's inputs and prints its table.
func (o *getOptions) fleet(ctx context.Context, opts Options) error {
	switch {
	case o.selector != "", o.watch, o.noHeaders, o.output == outputName, strings.Contains(o.output, "="):
		return errors.New("the fleet view takes -n, -A and -o wide, yaml or json only (no -l, --watch, --no-headers, -o name, jsonpath or custom-columns); 'uprev dashboard' shows it live")
	}
	namespace := ""
	if !o.allNamespaces {
		ns, err := o.cluster.namespace()
		if err != nil {
			return err
		}
		namespace = ns
	}
	c, err := o.cluster.client(opts.ErrOut)
	if err != nil {
		return err
	}
	in, err := fleet.Load(ctx, c, namespace)
	if err != nil {
		return err
	}
	in.Now = opts.Clock.Now()
	t := fleet.Build(in)
	if len(t.Rows) == 0 && (o.output == outputTable || o.output == outputWide) {
		if namespace == "" {
			_, _ = fmt.Fprintln(opts.ErrOut, "No components deployed by a Sync found.")
		} else {
			_, _ = fmt.Fprintf(opts.ErrOut, "No components deployed by a Sync found in namespace %s.\n", namespace)
		}
		return nil
	}
	if err := fleet.Render(opts.Out, t, fleet.Format(o.output)); err != nil {
		return err
	}
	return nil
}
