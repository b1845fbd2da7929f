package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// command is every command's options, built kubectl's way
// (sample-cli-plugin pkg/cmd/ns.go): Complete fills them from the
// arguments and whatever only the command line knows, Validate checks
// them, Run does the work.
type command interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// run is every command's RunE: the output format checked, Complete,
// Validate, then Run. Whatever error comes out is explained here, once for
// every command: inputs named as their flags, and the next step for each
// engine sentinel.
func run(c command) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := validateOutput(cmd)
		if err == nil {
			err = c.Complete(cmd, args)
		}
		if err == nil {
			err = c.Validate()
		}
		if err == nil {
			err = c.Run(cmd.Context())
		}
		return explain(err, cmd.Name(), appOf(c))
	}
}

// appOf is the Application a command acts on, which its hints name; none
// for a command that names no one Application.
func appOf(c command) audit.AppRef {
	if named, ok := c.(interface{ appRef() audit.AppRef }); ok {
		return named.appRef()
	}
	return audit.AppRef{}
}

// subcommand is a command group's Args: an argument is a subcommand it
// does not have, named with cobra's suggestions on one line. "audit verfy"
// said the group "takes no arguments".
func subcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
		msg += ": did you mean " + strings.Join(suggestions, " or ") + "?"
	}
	return usageErrorf("%s (see %s -h)", msg, cmd.CommandPath())
}

// positional is every command's Args: the arguments it takes, by name,
// the first required of them needed. A wrong count is a usage error (exit
// 2) that names them.
func positional(required int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(names) == 0 && len(args) > 0:
			return usageErrorf("%s takes no arguments, got %q (see %s -h)", cmd.CommandPath(), args, cmd.CommandPath())
		case required == len(names) && len(args) != required:
			return usageErrorf("%s needs %d argument(s): %v, got %d (see %s -h)", cmd.CommandPath(), len(names), names, len(args), cmd.CommandPath())
		case len(args) < required:
			return usageErrorf("%s needs at least %d argument(s): %v, got %d (see %s -h)", cmd.CommandPath(), required, names[:required], len(args), cmd.CommandPath())
		case len(args) > len(names):
			return usageErrorf("%s takes at most %d argument(s): %v, got %d (see %s -h)", cmd.CommandPath(), len(names), names, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// arg is args[i], "" when it was not given.
func arg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}

// addAllNamespaces registers -A/--all-namespaces; what takes it refuses it
// beside APP (allNamespacesWithApp).
func addAllNamespaces(cmd *cobra.Command, all *bool, what string) {
	cmd.Flags().BoolVarP(all, "all-namespaces", "A", false, what+" in every namespace")
}

// allNamespacesWithApp refuses APP with --all-namespaces.
func allNamespacesWithApp(app string, all bool, verb string) error {
	if app != "" && all {
		return usageErrorf("APP and --all-namespaces cannot be combined: name an Application, or %s them all", verb)
	}
	return nil
}

// noneSelected is, for a listing that found no Application, the warning
// that says where it looked, printed, and returned as the reason the
// answer is not whole (ExitCannotTell under --exit-code); nil when apps
// were found or one was named. A typo in --app-namespace passed a gate as
// "no drift in 0 application(s)", exit 0.
func noneSelected(errOut io.Writer, query argocd.AppQuery, found int) error {
	if found > 0 || query.Name != "" {
		return nil
	}
	where := "in any namespace"
	if query.Namespace != "" {
		where = "in namespace " + query.Namespace
	}
	filters := ""
	if query.Selector != "" || query.Project != "" {
		filters = " matching --selector/--project"
	}
	err := fmt.Errorf("no Application %s%s: is --app-namespace right (or -A)?", where, filters)
	warn(errOut, err.Error())
	return err
}
