package plugin

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// NewCmdCompletion returns the completion command for bash, zsh, fish and
// powershell.
func NewCmdCompletion(streams genericiooptions.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Long: `Print a completion script for the named shell. Under kubectl (1.26 or newer)
completion of "kubectl gitops …" instead uses the kubectl_complete-gitops script
shipped beside the binary: put it on your PATH.`,
		Example: `  # bash, for the current shell
  source <(kubectl gitops completion bash)

  # zsh, permanently
  kubectl gitops completion zsh > "${fpath[1]}/_kubectl-gitops"`,
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Args:      exactArgs("SHELL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(streams.Out, true)
			case "zsh":
				return root.GenZshCompletion(streams.Out)
			case "fish":
				return root.GenFishCompletion(streams.Out, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(streams.Out)
			}
			return usageErrorf("unsupported shell %q: use bash, zsh, fish or powershell", args[0])
		},
	}
}
