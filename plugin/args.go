package plugin

import (
	"context"

	"github.com/spf13/cobra"
)

// noArgs rejects positional arguments with a usage error (exit 2).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s takes no arguments, got %q (see %s -h)", cmd.CommandPath(), args, cmd.CommandPath())
	}
	return nil
}

// exactArgs requires n positional arguments, naming them in the error.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageErrorf("%s needs %d argument(s): %v, got %d (see %s -h)", cmd.CommandPath(), len(names), names, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// maxArgs allows up to one positional argument per name, naming them in the
// error.
func maxArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > len(names) {
			return usageErrorf("%s takes at most %d argument(s): %v, got %d (see %s -h)", cmd.CommandPath(), len(names), names, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// command is what every command's options are: checked, then run.
type command interface {
	Validate() error
	Run(ctx context.Context) error
}

// withOptionalApp is the RunE of a command taking [APP]: the argument, if
// given, into app, then Validate, then Run.
func withOptionalApp(app *string, c command) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 {
			*app = args[0]
		}
		if err := c.Validate(); err != nil {
			return err
		}
		return c.Run(cmd.Context())
	}
}

// addAllNamespaces registers -A/--all-namespaces.
func addAllNamespaces(cmd *cobra.Command, all *bool) {
	cmd.Flags().BoolVarP(all, "all-namespaces", "A", false, "Applications in every namespace")
}
