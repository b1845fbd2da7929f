package plugin

import "github.com/spf13/cobra"

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
