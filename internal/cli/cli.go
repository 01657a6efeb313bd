// Package cli is uprev's command line: the root command and its
// subcommands, one file per command group. Bare, the binary prints its
// help; with the manager's flags and no subcommand, it runs the manager as
// `uprev run` does, so that Deployments written for earlier images keep
// working.
package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"

	"github.com/uprev-dev/uprev/internal/printable"
)

// Options are what every command shares.
type Options struct {
	// IOStreams are where commands read and write.
	genericiooptions.IOStreams
	// Clock is what ages (the AGE column of `uprev get`) and reconcile
	// request times are taken from; nil means the real clock.
	Clock clock.Clock
}

// Command groups, in the order `uprev --help` lists them.
const (
	groupManager = "manager"
	groupInspect = "inspect"
	groupOperate = "operate"
)

// rootLong is the help of the bare binary.
const rootLong = `uprev writes the versions its image policies select into Git and applies
Git onto clusters.

The manager is 'uprev run' (see 'uprev run --help'), which the image runs.`

// exitCode ends a command with an exit code other than 0 or 1 and no
// message: `uprev plan` exits 2 when something would change.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit code %d", int(c)) }

// Execute runs the command line args (without the program name) and
// returns the process's exit code: 0 on success, 1 on error (the error is
// written to opts.ErrOut), or the code a command chose. Everything written
// to opts.Out and opts.ErrOut passes printable.String: a control
// character that came from the cluster is shown escaped, never sent to the
// terminal.
func Execute(ctx context.Context, args []string, opts Options) int {
	out, errOut := printable.NewWriter(opts.Out), printable.NewWriter(opts.ErrOut)
	defer func() {
		_ = out.Flush()
		_ = errOut.Flush()
	}()
	opts.Out, opts.ErrOut = out, errOut
	root := NewRootCommand(opts)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	_, _ = fmt.Fprintf(opts.ErrOut, "%s: %v\n", cmd.CommandPath(), err)
	return 1
}

// NewRootCommand returns the `uprev` command with every subcommand.
func NewRootCommand(opts Options) *cobra.Command {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	var mgr managerOptions
	root := &cobra.Command{
		Use:   "uprev",
		Short: "GitOps image automation for Kubernetes",
		Long:  rootLong,
		// Bare, the binary prints its help. With the flags of `uprev run`,
		// hidden here so that the help lists the commands, it is the
		// manager, as images before the entrypoint was `uprev run` were
		// started.
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().NFlag() == 0 {
				return cmd.Help()
			}
			return mgr.run(cmd.Context())
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	mgr.bindFlags(root.Flags())
	root.Flags().VisitAll(func(f *pflag.Flag) { f.Hidden = true })
	root.SetIn(opts.In)
	root.SetOut(opts.Out)
	root.SetErr(opts.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w\nSee '%s --help' for usage", err, c.CommandPath())
	})

	root.AddGroup(
		&cobra.Group{ID: groupManager, Title: "Manager:"},
		&cobra.Group{ID: groupInspect, Title: "Inspect:"},
		&cobra.Group{ID: groupOperate, Title: "Operate:"},
	)
	root.AddCommand(
		newRunCommand(),
		newInstallCommand(opts),
		newCheckCommand(opts),
		newGetCommand(opts),
		newPlanCommand(opts),
		newReconcileCommand(opts),
		newSuspendCommand(opts),
		newResumeCommand(opts),
		newReleaseHoldCommand(opts),
		newRejectCommand(opts),
		newDashboardCommand(opts),
		newVersionCommand(opts),
	)
	return root
}
