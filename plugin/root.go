// Package plugin holds the kubectl gitops command line: cobra commands, flags,
// terminal handling, output formats and exit codes. It is the only package
// that prints or knows a flag's name; the engine packages (breakglass,
// drift, argocd) and the audit log (audit) return values instead, and
// nothing imports plugin but cmd/kubectl-gitops.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"unicode"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// The exit codes of every command, one name each (docs/design.md §2,
// docs/commands.md, "Exit codes and errors").
const (
	// ExitOK is success, and a check's "yes" (caught up, no drift).
	ExitOK = 0
	// ExitFailure is a failure, and a documented "not yet" answer: status
	// --exit-code not caught up, a refused restore, drift found with
	// --exit-code, tampering found by audit verify.
	ExitFailure = 1
	// ExitUsage is a command line the command cannot take as written.
	ExitUsage = 2
	// ExitCannotTell is a check that could not give its answer: audit
	// verify or audit report could not read the log, drift, contract
	// check, debt or status with --exit-code (or status --wait) could not
	// read all they check (cannotTell). Scripts tell it from 1.
	ExitCannotTell = 3
)

// ExitError carries the exit code a command wants beside its message. A nil
// Err with a code means "say nothing more, exit with Code" (for documented
// "not yet" answers that already printed their result).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// cannotTell is the deferred end of a check whose exit 1 is an answer
// (drift, contract check, debt and status with --exit-code, status --wait,
// audit report): when answers, an error of the command's own exits
// ExitCannotTell, so that a script never reads "could not look" as "no".
// Usage errors and answers keep their codes.
func cannotTell(err *error, answers bool) {
	var exit *ExitError
	if *err != nil && answers && !errors.As(*err, &exit) {
		*err = &ExitError{Code: ExitCannotTell, Err: *err}
	}
}

// exitCode is --exit-code, of the commands that answer a question (drift,
// debt, contract check, status): 0 for no, 1 for yes, 3 when the command
// could not tell (with cannotTell for its own errors).
type exitCode bool

func (x *exitCode) register(cmd *cobra.Command, usage string) {
	cmd.Flags().BoolVar((*bool)(x), "exit-code", false, usage)
}

// answer is the exit for what the command found: ExitFailure when found;
// else ExitCannotTell with partial, why the answer is not whole. Without
// --exit-code it is always nil (exit 0).
func (x exitCode) answer(found bool, partial error) error {
	switch {
	case !bool(x):
		return nil
	case found:
		return &ExitError{Code: ExitFailure}
	case partial != nil:
		return &ExitError{Code: ExitCannotTell, Err: partial}
	}
	return nil
}

// usageErrorf returns an error that exits 2: the user asked for something the
// command cannot take as written.
func usageErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// usageError makes err a usage error (exit 2).
func usageError(err error) error {
	return &ExitError{Code: ExitUsage, Err: err}
}

// Main runs the plugin with args and returns the process exit code. It prints
// errors as one lowercase line starting "error: ".
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	cmd := NewCmdRoot(NewFactory(streams))
	cmd.SetArgs(args)
	return Execute(ctx, cmd, streams)
}

// Execute runs cmd and maps its error to an exit code, printing the error.
func Execute(ctx context.Context, cmd *cobra.Command, streams genericiooptions.IOStreams) int {
	err := reach(spellInput(cmd.ExecuteContext(ctx)))
	if err == nil {
		return ExitOK
	}
	code := ExitFailure
	var exitErr *ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.Code
		if exitErr.Err == nil {
			return code
		}
	} else if isCobraUsageError(err) {
		code = ExitUsage
	}
	fmt.Fprintln(streams.ErrOut, "error: "+printable(redact.Text(lowerFirst(err.Error()))))
	return code
}

// isCobraUsageError recognises the errors cobra itself returns for a command
// line it cannot parse, which carry no type of their own.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, prefix := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "flag needs an argument", "required flag", "accepts ", "requires at least", "if any flags in the group"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// lowerFirst lowers the first letter of an error, unless it begins a word
// in capitals (APP, TARGET, ID): "aPP and --all-namespaces" read as a typo.
func lowerFirst(s string) string {
	if s == "" || len(s) > 1 && unicode.IsUpper(rune(s[1])) {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// takesNamespace marks, in a command's Annotations, the commands that read
// -n/--namespace, with what it means to them.
const takesNamespace = "kubectl-gitops.io/namespace"

// refuseNamespace refuses -n/--namespace where it means nothing: every
// command registers kubeconfig's flags, but only breakglass reads -n (its
// TARGET's namespace), and the others ignored it silently. The error names
// the flag the command takes instead.
func refuseNamespace(cmd *cobra.Command, _ []string) error {
	if !cmd.Flags().Changed("namespace") || cmd.Annotations[takesNamespace] != "" {
		return nil
	}
	msg := fmt.Sprintf("%s takes no -n/--namespace (it is breakglass's TARGET namespace)", cmd.CommandPath())
	for _, instead := range []string{"app-namespace", "audit-namespace"} {
		if f := cmd.Flags().Lookup(instead); f != nil {
			return usageErrorf("%s: use --%s, the %s", msg, instead, f.Usage)
		}
	}
	return usageErrorf("%s", msg)
}

// keepsClientLogs marks, in a command's Annotations, the long-running
// commands (the controller) whose log is where client-go's own messages
// belong.
const keepsClientLogs = "kubectl-gitops.io/client-logs"

// quietClientLogs silences client-go's klog output for a command that
// prints one error line: its discovery cache logged "Couldn't get current
// server API group list" twice, in klog's format, before the one error: line
// that already says the server cannot be reached.
func quietClientLogs(cmd *cobra.Command) {
	if cmd.Annotations[keepsClientLogs] == "" {
		klog.SetLogger(logr.Discard())
	}
}

// checkRequestTimeout refuses a --request-timeout client-go cannot read
// as a usage error (exit 2): it surfaced only when the first client was
// built, as a failure (exit 1).
func checkRequestTimeout(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("request-timeout")
	if f == nil || !f.Changed {
		return nil
	}
	v := f.Value.String()
	if _, err := clientcmd.ParseTimeout(v); err == nil {
		return nil
	}
	return usageErrorf("--request-timeout %q is not a duration: give one like 30s or 2m (0 waits as long as it takes)", v)
}

// newCmdHelp is the help command: an unknown topic is a usage error (exit
// 2) on one line, where cobra's printed the whole usage and exited 0.
func newCmdHelp() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			parent, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, sub := range parent.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			topic, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usageErrorf("unknown help topic %q: run %s help to list the commands", strings.Join(args, " "), c.Root().DisplayName())
			}
			topic.InitDefaultHelpFlag()
			return topic.Help()
		},
	}
}

// hideNamespace wraps help so that -n/--namespace, a kubeconfig flag every
// command inherits, shows only on the commands that read it: listed under
// every command's global flags, it was refused by all but breakglass.
func hideNamespace(help func(*cobra.Command, []string)) func(*cobra.Command, []string) {
	return func(c *cobra.Command, args []string) {
		if f := c.Root().PersistentFlags().Lookup("namespace"); f != nil && c.Annotations[takesNamespace] == "" {
			f.Hidden = true
			defer func() { f.Hidden = false }()
		}
		help(c, args)
	}
}

// NewCmdRoot returns the kubectl gitops command with every subcommand,
// built from factory.
func NewCmdRoot(factory *Factory) *cobra.Command {
	streams := factory.streams
	cmd := &cobra.Command{
		// The command's name is the binary's: completion scripts are
		// generated for it, and one generated for "kubectl" would replace
		// kubectl's own. Help shows the display name below.
		Use:   "kubectl-gitops",
		Short: "Audited break-glass for Argo CD Applications",
		Long: `kubectl gitops pauses an Argo CD Application's automated sync without losing its
policy, applies an emergency patch to a live resource, records who did what and
why in a tamper-evident audit log, and restores sync once Git has caught up.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// The plugin is invoked as "kubectl gitops"; cobra would otherwise
		// print the binary name.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl gitops"},
	}
	cmd.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		quietClientLogs(cmd)
		if err := checkRequestTimeout(cmd); err != nil {
			return err
		}
		return refuseNamespace(cmd, args)
	}
	// Runnable, so that an unknown command is subcommand's one line with
	// its suggestion, as in every group.
	cmd.Args = subcommand
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	cmd.SetHelpCommand(newCmdHelp())
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	factory.configFlags.AddFlags(cmd.PersistentFlags())
	cmd.SetHelpFunc(hideNamespace(cmd.HelpFunc()))
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)

	cmd.AddCommand(NewCmdVersion(factory))
	cmd.AddCommand(NewCmdBreakglass(factory))
	cmd.AddCommand(NewCmdStatus(factory))
	cmd.AddCommand(NewCmdDrift(factory))
	cmd.AddCommand(NewCmdContract(factory))
	cmd.AddCommand(NewCmdDebt(factory))
	cmd.AddCommand(NewCmdRestore(factory))
	cmd.AddCommand(NewCmdPropose(factory))
	cmd.AddCommand(NewCmdAudit(factory))
	cmd.AddCommand(NewCmdTicket(factory))
	cmd.AddCommand(NewCmdController(factory))
	cmd.AddCommand(NewCmdCompletion(factory))
	return cmd
}
