package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// NewCmdContract returns the contract command and its check.
func NewCmdContract(factory *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "contract",
		Short: "Check Applications against their namespaces' live-state contracts",
		Long: `A namespace declares its live-state contract with annotations on the Namespace
(only those who may edit namespaces can change them):

  ` + drift.ContractPatches + `: forbidden | break-glass | allowed
  ` + drift.ContractGroups + `: GROUP[,GROUP…]   who may patch live state
  ` + drift.ContractSelfHeal + `: on | off       whether Applications there self-heal

breakglass refuses a target in a namespace that forbids live patches, or whose
groups do not include yours; drift flags a person's or a pipeline's write where
live patches are forbidden or go through break-glass only; contract check
reports Applications whose self-heal contradicts the contract.`,
		Args: subcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdContractCheck(factory))
	return cmd
}

// ContractCheckOptions holds the flags of `contract check`.
type ContractCheckOptions struct {
	engineFlags
	App           string
	AllNamespaces bool
	Output        string
	ExitCode      exitCode
	genericiooptions.IOStreams
}

func newCmdContractCheck(factory *Factory) *cobra.Command {
	o := &ContractCheckOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "check [APP]",
		Short: "Report Applications whose self-heal contradicts their namespace's contract",
		Example: `  kubectl gitops contract check -A
  kubectl gitops contract check -A -o json --exit-code`,
		Args:              positional(0, "APP"),
		ValidArgsFunction: o.completeApplications(false),
		RunE:              run(o),
	}
	o.addAppNamespace(cmd)
	o.addEngineFlags(cmd)
	addAllNamespaces(cmd, &o.AllNamespaces, "Applications")
	o.ExitCode.register(cmd, "exit 1 when an Application contradicts its contract, 3 when a contract could not be read")
	outputFlag(cmd, &o.Output, "table", "json", "yaml")
	return cmd
}

// Complete takes APP.
func (o *ContractCheckOptions) Complete(_ *cobra.Command, args []string) error {
	o.App = arg(args, 0)
	return nil
}

// Validate checks the flags.
func (o *ContractCheckOptions) Validate() error {
	if err := allNamespacesWithApp(o.App, o.AllNamespaces, "check"); err != nil {
		return err
	}
	return nil
}

// Run checks and prints the findings.
func (o *ContractCheckOptions) Run(ctx context.Context) (err error) {
	defer cannotTell(&err, bool(o.ExitCode))
	engine, err := o.engine()
	if err != nil {
		return err
	}
	query := appQuery(o.App, o.AppNamespace, o.AllNamespaces)
	apps, err := engine.Apps(ctx, query)
	if err != nil {
		return err
	}
	findings, notes, err := drift.CheckContracts(ctx, &engine.Client, apps)
	if err != nil {
		return err
	}
	// A pause nobody's session accounts for contradicts every contract:
	// Git stops deploying there, and nothing says so.
	orphans, err := engine.OrphanedPauses(ctx, apps)
	if err != nil {
		return err
	}
	for _, orphan := range orphans {
		warn(o.ErrOut, orphan)
	}
	if o.Output != "table" {
		if err := printStructured(o.Out, o.Output, findings); err != nil {
			return err
		}
	} else if len(findings) == 0 {
		fmt.Fprintf(o.ErrOut, "%d application(s) checked: none contradicts its namespace's contract\n", len(apps))
	} else {
		t := newTable(o.Out, "APP", "NAMESPACE", "EXPECTS", "SELF-HEAL", "PROBLEM")
		for _, f := range findings {
			heal := "off"
			if f.SelfHeal {
				heal = "on"
			}
			t.row(f.App.Name, f.Contract.Namespace, "self-heal "+f.Contract.SelfHeal, heal, f.Problem)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	for _, n := range notes {
		note(o.ErrOut, "note: %s", strings.TrimSpace(n))
	}
	partial := noneSelected(o.ErrOut, query, len(apps))
	if len(notes) > 0 {
		partial = errors.New("some contracts could not be read (see the notes)")
	}
	return o.ExitCode.answer(len(findings) > 0 || len(orphans) > 0, partial)
}
