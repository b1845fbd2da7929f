package plugin

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// NewCmdTicket returns the ticket command group.
func NewCmdTicket(factory *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ticket",
		Short: "Jira reconcile tickets",
		Args:  subcommand,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(NewCmdTicketSync(factory))
	return cmd
}

// TicketSyncOptions holds the flags of `kubectl gitops ticket sync`.
type TicketSyncOptions struct {
	engineFlags
	Output string
	genericiooptions.IOStreams
}

// NewCmdTicketSync returns the ticket sync command.
func NewCmdTicketSync(factory *Factory) *cobra.Command {
	o := &TicketSyncOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "File the Jira work queued while Jira was unreachable or not configured",
		Long: `Read the audit log for Jira work that was queued (Jira unreachable or not
configured) or failed (credentials or fields refused), and do it now: file the
session's ticket (after looking it up by its session label, so it is filed
once), comment the details on a --ticket issue, and close the ticket of a
session restored meanwhile. Several runs at once do each session's work once.

Exit 0 when nothing is left queued, 1 when some work failed again.`,
		Example: `  export JIRA_URL=https://example.atlassian.net JIRA_PROJECT=OPS
  export JIRA_USER=oncall@example.com JIRA_API_TOKEN=...
  kubectl gitops ticket sync`,
		Args: positional(0),
		RunE: run(o),
	}
	o.addEngineFlags(cmd)
	outputFlag(cmd, &o.Output, "text", "json", "yaml")
	return cmd
}

// Complete has nothing to take: ticket sync has no arguments.
func (o *TicketSyncOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate checks the flags.
func (o *TicketSyncOptions) Validate() error { return nil }

// Run does the queued work and reports each session.
func (o *TicketSyncOptions) Run(ctx context.Context) error {
	engine, err := o.engine()
	if err != nil {
		return err
	}
	synced, err := engine.SyncTickets(ctx)
	if err != nil {
		return err
	}
	failed := 0
	for _, s := range synced {
		if s.Error != "" {
			failed++
		}
	}
	if o.Output != "text" {
		if err := printStructured(o.Out, o.Output, synced); err != nil {
			return err
		}
	} else {
		o.print(synced)
	}
	if failed > 0 {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%d of %d queued ticket(s) could not be synced; they stay queued", failed, len(synced))}
	}
	return nil
}

func (o *TicketSyncOptions) print(synced []breakglass.SyncedTicket) {
	if len(synced) == 0 {
		fmt.Fprintln(o.Out, "no queued tickets")
		return
	}
	for _, s := range synced {
		key := "-"
		if s.Ticket != nil && s.Ticket.Key != "" {
			key = s.Ticket.Key
		}
		switch {
		case s.Error != "":
			note(o.ErrOut, "%s session %s: %s", s.App.Name, s.Session, s.Error)
		case s.Skipped != "":
			note(o.Out, "%s session %s: skipped, %s", s.App.Name, s.Session, s.Skipped)
		default:
			note(o.Out, "%s session %s: %s %s %s", s.App.Name, s.Session, key, strings.Join(s.Done, ", "), s.Ticket.URL)
		}
	}
}
