package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/uprev-dev/uprev/internal/version"
)

// newVersionCommand returns `uprev version`, which prints the version and
// nothing else; it never starts the manager.
func newVersionCommand(opts Options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of uprev",
		Long: `Prints the version of this binary: the one 'make release' stamped in (from
'git describe'), else the module version Go recorded, else "(devel)".`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(opts.Out, version.Version())
			return err
		},
	}
}
