package plugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// DebtOptions holds the flags of `kubectl gitops debt`.
type DebtOptions struct {
	engineFlags
	App           string
	AllNamespaces bool
	MaxPerApp     int
	System        bool
	Output        string
	ExitCode      exitCode
	genericiooptions.IOStreams
	now func() time.Time
}

// NewCmdDebt returns the debt command and debt record.
func NewCmdDebt(factory *Factory) *cobra.Command {
	o := &DebtOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams, now: time.Now}
	cmd := &cobra.Command{
		Use:   "debt [APP]",
		Short: "List ignoreDifferences entries as owned debt: owner, reason, review date",
		Long: `Every ignoreDifferences entry hides drift from Argo CD. debt lists each entry of
the Applications (and, with --system, the resource.customizations.ignoreDifferences
keys of argocd-cm) with the owner, reason and review date recorded for it in the
` + drift.DebtAnnotation + ` annotation, and flags:

  no-owner                nobody recorded as owning it
  no-review-date          owned, but never to be reviewed
  review-overdue          its review date has passed
  matches-nothing         it names no managed resource of the Application
  over-cap                the Application has more entries than --max-per-app
  note-for-missing-entry  a note whose entry is gone

Record an entry's owner with kubectl gitops debt record.`,
		Example: `  kubectl gitops debt web
  kubectl gitops debt -A --system --exit-code
  kubectl gitops debt record web 3f2a9c1b7d20 --owner team-payments --reason "HPA owns replicas" --review 2027-03-01`,
		Args:              positional(0, "APP"),
		ValidArgsFunction: o.completeApplications(false),
		RunE:              run(o),
	}
	o.addAppNamespace(cmd)
	o.addEngineFlags(cmd)
	addAllNamespaces(cmd, &o.AllNamespaces, "Applications")
	cmd.Flags().IntVar(&o.MaxPerApp, "max-per-app", 5, "flag Applications with more entries than this (0: no cap)")
	cmd.Flags().BoolVar(&o.System, "system", false, "also list argocd-cm's system-level entries")
	o.ExitCode.register(cmd, "exit 1 when any entry is flagged, 3 when the entries could not be read")
	outputFlag(cmd, &o.Output, "table", "json", "yaml")
	cmd.AddCommand(newCmdDebtRecord(factory))
	return cmd
}

// Complete takes APP.
func (o *DebtOptions) Complete(_ *cobra.Command, args []string) error {
	o.App = arg(args, 0)
	return nil
}

// Validate checks the flags.
func (o *DebtOptions) Validate() error {
	if err := allNamespacesWithApp(o.App, o.AllNamespaces, "list"); err != nil {
		return err
	}
	if o.MaxPerApp < 0 {
		return usageErrorf("--max-per-app %d: use 0 for no cap, or a positive number", o.MaxPerApp)
	}
	return nil
}

// Run lists the entries.
func (o *DebtOptions) Run(ctx context.Context) (err error) {
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
	entries, err := drift.Debt(ctx, &engine.Client, apps, o.MaxPerApp, o.now(), o.System)
	if err != nil {
		return err
	}
	markHeld(entries, apps)
	flagged := 0
	for _, e := range entries {
		if len(e.Flags) > 0 {
			flagged++
		}
	}
	if o.Output != "table" {
		if err := printStructured(o.Out, o.Output, entries); err != nil {
			return err
		}
	} else if len(entries) == 0 {
		fmt.Fprintf(o.ErrOut, "no ignoreDifferences entries in %d application(s)\n", len(apps))
	} else {
		t := newTable(o.Out, "APP", "ID", "ENTRY", "OWNER", "REVIEW", "FLAGS")
		for _, e := range entries {
			app, owner, review := e.App.Name, "-", "-"
			if e.System {
				app = "(argocd-cm)"
			}
			if e.Note != nil {
				owner, review = dash(e.Note.Owner), dash(e.Note.Review)
			}
			if e.HeldBy != "" {
				owner, review = "session "+printable(e.HeldBy), "at restore"
			}
			t.row(app, e.ID, entrySummary(e), owner, review, dash(strings.Join(e.Flags, ",")))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return o.ExitCode.answer(flagged > 0, noneSelected(o.ErrOut, query, len(apps)))
}

// markHeld names the entries an open session's hold added (held by that
// session until its restore removes them) and clears their flags: they
// are no one's debt. The session annotation says which entries it saved
// (status names an annotation whose saved entries the audit log
// contradicts); every entry is still listed.
func markHeld(entries []drift.DebtEntry, apps []argocd.App) {
	held := map[string]string{}
	for _, app := range apps {
		session, list := breakglass.HeldEntries(app)
		for _, e := range list {
			held[app.GetNamespace()+"/"+app.GetName()+"/"+drift.DebtID(e)] = session
		}
	}
	for i := range entries {
		e := &entries[i]
		if s, ok := held[e.App.Namespace+"/"+e.App.Name+"/"+e.ID]; ok && !e.System {
			e.HeldBy, e.Flags = s, nil
		}
	}
}

// entrySummary is an entry in a few words: what it covers and which fields.
func entrySummary(e drift.DebtEntry) string {
	if e.System {
		return e.Key
	}
	if e.Entry == nil {
		return "-"
	}
	str := func(k string) string { s, _ := e.Entry[k].(string); return s }
	what := str("kind")
	if g := str("group"); g != "" {
		what += "." + g
	}
	if n := str("name"); n != "" {
		what += "/" + n
	}
	var fields []string
	for _, k := range []string{"jsonPointers", "jqPathExpressions", "managedFieldsManagers"} {
		if list, ok := e.Entry[k].([]any); ok {
			for _, v := range list {
				fields = append(fields, fmt.Sprint(v))
			}
		}
	}
	return what + " " + strings.Join(fields, ",")
}

// DebtRecordOptions holds the flags of `debt record`.
type DebtRecordOptions struct {
	engineFlags
	App, ID string
	Note    drift.DebtNote
	genericiooptions.IOStreams
}

func newCmdDebtRecord(factory *Factory) *cobra.Command {
	o := &DebtRecordOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "record APP ID",
		Short: "Record who owns an ignoreDifferences entry, why, and when to review it",
		Long: `Record the owner, reason and review date of the Application's ignoreDifferences
entry ID (as debt lists it) in the ` + drift.DebtAnnotation + ` annotation, with a patch
guarded by the Application's resourceVersion.`,
		Example: `  kubectl gitops debt record web 3f2a9c1b7d20 --owner team-payments --reason "HPA owns replicas" --review 2027-03-01`,
		Args:    positional(2, "APP", "ID"),
		RunE:    run(o),
	}
	o.addAppNamespace(cmd)
	o.addEngineFlags(cmd)
	cmd.Flags().StringVar(&o.Note.Owner, "owner", "", "who owns the entry (a team to page)")
	cmd.Flags().StringVar(&o.Note.Reason, "reason", "", "why the difference is ignored")
	cmd.Flags().StringVar(&o.Note.Review, "review", "", "when to review it: YYYY-MM-DD")
	return cmd
}

// Complete takes APP and ID.
func (o *DebtRecordOptions) Complete(_ *cobra.Command, args []string) error {
	o.App, o.ID = arg(args, 0), arg(args, 1)
	return nil
}

// Validate checks the flags.
func (o *DebtRecordOptions) Validate() error {
	if strings.TrimSpace(o.Note.Owner) == "" || strings.TrimSpace(o.Note.Reason) == "" || o.Note.Review == "" {
		return usageErrorf("--owner, --reason and --review are all required")
	}
	if _, err := time.Parse("2006-01-02", o.Note.Review); err != nil {
		return usageErrorf("--review %q: use YYYY-MM-DD", o.Note.Review)
	}
	return nil
}

// Run records the note.
func (o *DebtRecordOptions) Run(ctx context.Context) error {
	engine, err := o.engine()
	if err != nil {
		return err
	}
	if err := drift.RecordDebt(ctx, &engine.Client, o.App, o.ID, o.Note); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "recorded entry %s of %s: owner %s, review %s\n", o.ID, o.App, printable(o.Note.Owner), o.Note.Review)
	return nil
}
