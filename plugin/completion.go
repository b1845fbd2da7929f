package plugin

import (
	"context"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// NewCmdCompletion returns the completion command for bash, zsh, fish and
// powershell.
func NewCmdCompletion(factory *Factory) *cobra.Command {
	o := &CompletionOptions{IOStreams: factory.streams}
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Long: `Print a completion script for the kubectl-gitops binary in the named shell;
it leaves kubectl's own completion alone. Under kubectl (1.26 or newer)
completion of "kubectl gitops …" instead uses the kubectl_complete-gitops script
shipped beside the binary: put it on your PATH.`,
		Example: `  # bash, for the current shell
  source <(kubectl gitops completion bash)

  # zsh, permanently
  kubectl gitops completion zsh > "${fpath[1]}/_kubectl-gitops"`,
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Args:      positional(1, "SHELL"),
		RunE:      run(o),
	}
}

// CompletionOptions holds what `kubectl gitops completion` takes.
type CompletionOptions struct {
	Shell string
	root  *cobra.Command
	genericiooptions.IOStreams
}

// Complete takes SHELL, and the command tree the script completes.
func (o *CompletionOptions) Complete(cmd *cobra.Command, args []string) error {
	o.Shell, o.root = arg(args, 0), cmd.Root()
	return nil
}

// Validate checks SHELL.
func (o *CompletionOptions) Validate() error {
	switch o.Shell {
	case "bash", "zsh", "fish", "powershell":
		return nil
	}
	return usageErrorf("unsupported shell %q: use bash, zsh, fish or powershell", o.Shell)
}

// Run prints the script.
func (o *CompletionOptions) Run(context.Context) error {
	switch o.Shell {
	case "bash":
		return o.root.GenBashCompletionV2(o.Out, true)
	case "zsh":
		return o.root.GenZshCompletion(o.Out)
	case "fish":
		return o.root.GenFishCompletion(o.Out, true)
	}
	return o.root.GenPowerShellCompletionWithDesc(o.Out)
}

// completionTimeout bounds the cluster reads behind a TAB: a shell waits
// for them.
const completionTimeout = 5 * time.Second

// completeApplications completes APP, the first argument, with the
// Applications of --app-namespace; withSession keeps those with an open
// session (restore, status). Each comes with its project and state.
func (f *engineFlags) completeApplications(withSession bool) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f.applicationNames(cmd.Context(), withSession, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func (f *engineFlags) applicationNames(ctx context.Context, withSession bool, prefix string) []string {
	engine, err := f.engine()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(orBackground(ctx), completionTimeout)
	defer cancel()
	candidates, err := engine.Candidates(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range candidates {
		if !strings.HasPrefix(c.Name, prefix) || withSession && c.Session == "" {
			continue
		}
		about := "project " + dash(c.Project) + ", " + dash(c.Sync)
		if c.Session != "" {
			about += ", session " + c.Session + " open"
		}
		out = append(out, c.Name+"\t"+completionText(about))
	}
	return out
}

// completeBreakglass completes APP, then TARGET with APP's managed
// resources as KIND.GROUP/NAME.
func (f *engineFlags) completeBreakglass(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return f.applicationNames(cmd.Context(), false, toComplete), cobra.ShellCompDirectiveNoFileComp
	case 1:
	default:
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	engine, err := f.engine()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(orBackground(cmd.Context()), completionTimeout)
	defer cancel()
	resources, err := engine.ManagedResources(ctx, args[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, r := range resources {
		if arg := r.Arg(); strings.HasPrefix(arg, toComplete) {
			out = append(out, arg+"\t"+completionText("namespace "+dash(r.Target.Namespace)+", "+dash(r.Sync)))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completionText keeps a description to one printable line: names and
// states come from the cluster.
func completionText(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
