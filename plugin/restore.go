package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// RestoreOptions holds the flags of `kubectl gitops restore`.
type RestoreOptions struct {
	engineFlags
	Request breakglass.RestoreRequest
	Yes     bool
	Wait    bool
	Timeout time.Duration
	Output  string
	genericiooptions.IOStreams
}

// NewCmdRestore returns the restore command.
func NewCmdRestore(factory *Factory) *cobra.Command {
	o := &RestoreOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "restore APP",
		Short: "Re-enable sync with the saved policy once Git has caught up",
		Long: `Restore the Application's exact saved sync policy and close the break-glass
session, but only when Git has caught up with the live fix (see kubectl gitops
status): otherwise Argo CD would revert it. --force restores anyway and needs
--reason; it is recorded as breakglass.forced.`,
		Example: `  kubectl gitops restore web
  kubectl gitops restore web --dry-run
  kubectl gitops restore web --force --reason "fix abandoned, reverting to Git" -y`,
		Args:              positional(1, "APP"),
		ValidArgsFunction: o.completeApplications(true),
		RunE:              run(o),
	}
	o.addAppNamespace(cmd)
	o.addEngineFlags(cmd)
	cmd.Flags().BoolVar(&o.Request.Force, "force", false, "restore even though Git has not caught up (needs --reason)")
	cmd.Flags().StringVar(&o.Request.Reason, "reason", "", "why a forced restore is right (recorded)")
	allowSecretTextFlag(cmd, &o.Request.AllowSecretText, "--reason")
	cmd.Flags().BoolVar(&o.Request.DryRun, "dry-run", false, "check whether restore would go ahead; change nothing")
	cmd.Flags().BoolVarP(&o.Yes, "yes", "y", false, "do not ask for confirmation of a forced restore")
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "after restoring, wait until Argo CD reports the Application Synced")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 5*time.Minute, "how long --wait waits")
	outputFlag(cmd, &o.Output, "text", "json", "yaml")
	return cmd
}

// Complete takes APP.
func (o *RestoreOptions) Complete(_ *cobra.Command, args []string) error {
	o.Request.App = arg(args, 0)
	return nil
}

func (o *RestoreOptions) appRef() audit.AppRef {
	return audit.AppRef{Namespace: o.AppNamespace, Name: o.Request.App}
}

// Validate checks the flags.
func (o *RestoreOptions) Validate() error {
	if err := o.Request.Validate(); err != nil {
		return usageError(err)
	}
	if o.Request.Force && !o.Request.DryRun && !o.Yes && !isTerminal(o.In) {
		return usageErrorf("--yes is required for --force when stdin is not a terminal")
	}
	return nil
}

// Run restores and reports.
func (o *RestoreOptions) Run(ctx context.Context) (err error) {
	engine, err := o.engineFlags.engine()
	if err != nil {
		return err
	}
	if o.Request.Argo, err = o.argoServer(); err != nil {
		return err
	}
	if o.Request.Force && !o.Request.DryRun && !o.Yes {
		if err := confirmApp(o.In, o.ErrOut, "Forcing the restore may revert the live fix.", o.Request.App); err != nil {
			return err
		}
	}
	st, err := engine.Restore(ctx, o.Request)
	if st != nil {
		for _, n := range st.Notes {
			note(o.ErrOut, "note: %s", n)
		}
	}
	if err != nil {
		if st != nil && o.Output != "text" && errors.Is(err, breakglass.ErrNotCaughtUp) {
			// The state restore refused on is what -o asks for: it
			// printed nothing when Git was behind.
			if perr := printStructured(o.Out, o.Output, st); perr != nil {
				return perr
			}
		}
		return err
	}
	if len(st.Mismatch) > 0 {
		done := "was restored as its records have it, and the restore's record names the disagreement"
		if o.Request.DryRun {
			done = "would be restored as its records have it"
		}
		warn(o.ErrOut, fmt.Sprintf("the session annotation disagrees with its audit records (see the note): session %s %s", st.Session.ID, done))
	}
	for _, w := range st.Warnings {
		warn(o.ErrOut, w)
	}
	if o.Output != "text" {
		return printStructured(o.Out, o.Output, st)
	}
	switch {
	case o.Request.DryRun:
		fmt.Fprintf(o.Out, "restore of %s would go ahead: Git is %s at %s (dry run: nothing was changed)\n", o.Request.App, st.Git, argocd.DescribeGit(st.GitAt()))
		return nil
	case st.Ready:
		fmt.Fprintf(o.Out, "restored the saved sync policy of %s: Git caught up at %s; session %s closed\n", o.Request.App, argocd.DescribeGit(st.GitAt()), printable(st.Session.ID))
	default:
		fmt.Fprintf(o.Out, "forced restore of %s (Git %s); session %s closed and recorded as forced\n", o.Request.App, st.Git, printable(st.Session.ID))
	}
	if st.Session.Ticket != "" && len(st.Warnings) == 0 {
		fmt.Fprintf(o.Out, "ticket %s commented and closed\n", printable(st.Session.Ticket))
	}
	if o.Wait {
		return o.waitSynced(ctx, engine)
	}
	return nil
}

func (o *RestoreOptions) waitSynced(ctx context.Context, engine *breakglass.Engine) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	last := ""
	progress := isTerminal(o.ErrOut) // for a person; silent for scripts
	_, err := engine.WaitApplication(ctx, o.Request.App, func(app argocd.App) bool {
		status := app.SyncStatus()
		if progress && status != "Synced" && status != last {
			note(o.ErrOut, "%s waiting for %s to sync (now %s)", time.Now().Format("15:04:05"), o.Request.App, status)
		}
		last = status
		return status == "Synced"
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s not Synced after %s", o.Request.App, o.Timeout)
		}
		return err
	}
	fmt.Fprintf(o.Out, "%s is Synced\n", o.Request.App)
	return nil
}
