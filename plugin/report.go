package plugin

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// AuditReportOptions holds the flags of `audit report`.
type AuditReportOptions struct {
	source auditSource
	since  string
	Since  time.Duration
	Jira   bool
	Output string
	now    func() time.Time
	genericiooptions.IOStreams
}

var reportFormats = []string{"markdown", "csv", "json"}

func newCmdAuditReport(factory *Factory) *cobra.Command {
	o := &AuditReportOptions{source: auditSource{Factory: factory}, IOStreams: factory.streams, now: time.Now}
	cmd := &cobra.Command{
		Use:   "report",
		Short: "The auditor's evidence: one row per emergency change, a summary, and the log it came from",
		Long: `One row per break-glass session (application, targets, opener, reason,
incident, what changed as recorded, opened, fix live, how it ended, time to
restore, the Git revision that caught up, ticket, the verdict that stands and
its reviewer, review delay to the first review that counts), every review of
each session (who, when, verdict, note, the rejection it overturns, and why it
does not count when it does not: a rejection stands until a different reviewer
overturns it, saying why, and only the reviewer role's reviews count), and a
summary (per application and month, median time to restore, share forced, share
reviewed within 48 h, unreviewed: restored or forced sessions with no approval
standing, never reviewed or rejected). The report states the result of
verifying the log it was read from and the newest record's hash, so the file an
auditor keeps is bound to the log. Exit 0 with an intact log, 1 when verify found
tampering (the report says so), 2 on a usage error, 3 when the log could not be
read or holds no record at all (the wrong --audit-namespace or --file, most
likely).`,
		Example: `  kubectl gitops audit report --since 90d > emergency-changes.md
  kubectl gitops audit report -o csv > emergency-changes.csv
  kubectl gitops audit report --file audit.jsonl -o json`,
		Args: positional(0),
		RunE: run(o),
	}
	o.source.addFlags(cmd)
	cmd.Flags().StringVar(&o.since, "since", "", "only sessions opened within this duration (e.g. 90d); default all")
	cmd.Flags().BoolVar(&o.Jira, "jira", false, "also check the records Jira tickets witnessed, as audit verify --jira does")
	outputFlag(cmd, &o.Output, reportFormats...)
	return cmd
}

// Complete reads --since.
func (o *AuditReportOptions) Complete(*cobra.Command, []string) (err error) {
	o.Since, err = sinceFlag(o.since)
	return err
}

// Validate checks the flags.
func (o *AuditReportOptions) Validate() error {
	if err := o.source.validate(); err != nil {
		return err
	}
	return nil
}

// Evidence is the report as -o json prints it.
type Evidence struct {
	Generated time.Time               `json:"generated"`
	Since     *time.Time              `json:"since,omitempty"`
	Log       EvidenceLog             `json:"log"`
	Changes   []audit.EmergencyChange `json:"changes"`
	Summary   audit.Summary           `json:"summary"`
}

// EvidenceLog is what the report says of the log it was read from.
type EvidenceLog struct {
	Source    string          `json:"source"`
	Records   int             `json:"records"`
	Intact    bool            `json:"intact"`
	Breaks    []audit.Break   `json:"breaks"`
	Warnings  []audit.Break   `json:"warnings,omitempty"`
	Witnesses string          `json:"witnesses"`
	Newest    audit.HeadState `json:"newest"`
}

// Run builds and prints the report.
func (o *AuditReportOptions) Run(ctx context.Context) (err error) {
	defer cannotTell(&err, true)
	store, err := o.source.store()
	if err != nil {
		return err
	}
	var ws []audit.Witness
	witnessed := "not checked (--jira checks them)"
	if o.Jira {
		if ws, err = witnesses(ctx); err != nil {
			return err
		}
		witnessed = fmt.Sprintf("%d checked", len(ws))
	}
	rep, err := audit.VerifyStore(ctx, store, ws, nil)
	if err != nil {
		return o.source.explain(err)
	}
	if err := o.source.empty(rep); err != nil {
		return err // cannotTell: exit 3, no evidence of nothing
	}
	if m, ok := store.(*audit.Mirror); ok {
		rep.Breaks = append(rep.Breaks, m.Findings()...)
	}
	entries, err := store.Entries(ctx, audit.Filter{})
	if err != nil {
		return o.source.explain(err)
	}
	ev := Evidence{Generated: o.now().UTC().Truncate(time.Second), Log: EvidenceLog{Source: o.sourceName(), Records: rep.Records, Intact: rep.Intact(), Breaks: rep.Breaks, Warnings: withFixes(rep.Warnings), Witnesses: witnessed, Newest: rep.Tip}}
	var since time.Time
	if o.Since > 0 {
		since = ev.Generated.Add(-o.Since)
		ev.Since = &since
	}
	ev.Changes, ev.Summary = audit.EmergencyChanges(audit.Trusted(entries), since)
	switch o.Output {
	case "json":
		err = printStructured(o.Out, "json", ev)
	case "csv":
		err = writeReportCSV(o.Out, ev)
	default:
		writeReportMarkdown(o.Out, ev)
	}
	if err != nil {
		return err
	}
	if !ev.Log.Intact {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("the audit log has %d break(s): the report says so; `%s` names them", len(rep.Breaks), next.AuditVerify(""))}
	}
	return nil
}

func (o *AuditReportOptions) sourceName() string {
	if o.source.File != "" {
		return "file " + o.source.File
	}
	if o.source.mirror.URL != "" {
		return "mirror " + o.source.mirror.URL
	}
	return "namespace " + o.source.Namespace
}

var reportColumns = []string{"application", "targets", "opener", "joiners", "reason", "incident", "changed", "opened", "fix_live",
	"end", "time_to_restore", "git_revision", "ticket", "reviewer", "verdict", "review_delay", "session", "reviews"}

func reportRow(c audit.EmergencyChange) []string {
	at := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.Format(time.RFC3339)
	}
	return []string{c.Application.Namespace + "/" + c.Application.Name, strings.Join(c.Targets, " "), c.Opener, strings.Join(c.Joiners, " "),
		c.Reason, c.Incident, strings.Join(c.Changes, "; "), c.Opened.Format(time.RFC3339), at(c.FixLive), c.End, c.TimeToRestore,
		c.GitRevision, c.Ticket, c.Reviewer, c.Verdict, c.ReviewDelay, c.Session, strings.Join(reviewHistory(c.Reviews), "; ")}
}

// reviewHistory is each review of a session in words: record, time, who,
// verdict, the rejection it overturns, the note, and why it does not
// count when it does not.
func reviewHistory(reviews []audit.ReviewEvent) []string {
	out := make([]string, len(reviews))
	for i, r := range reviews {
		s := fmt.Sprintf("record %d, %s, %s %s", r.Seq, r.Time.Format(time.RFC3339), r.Reviewer, r.Verdict)
		if r.Overturns != 0 {
			s += fmt.Sprintf(" overturning record %d", r.Overturns)
		}
		s += ": " + r.Note
		if !r.Counts {
			s += " (does not count: " + r.Finding + ")"
		}
		out[i] = s
	}
	return out
}

func writeReportCSV(w io.Writer, ev Evidence) error {
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	rows := [][]string{reportColumns}
	for _, c := range ev.Changes {
		row := reportRow(c)
		for i := range row {
			row[i] = csvCell(row[i])
		}
		rows = append(rows, row)
	}
	if err := cw.WriteAll(rows); err != nil {
		return err
	}
	return cw.Error()
}

// mdCell is a Markdown table cell: printable, with the characters that
// end a cell or a line made literal.
func mdCell(s string) string {
	if s == "" {
		return "-"
	}
	s = printable(s)
	return strings.NewReplacer(`|`, `\|`, "`", "\\`", "<", "&lt;", ">", "&gt;", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`).Replace(s)
}

func writeReportMarkdown(w io.Writer, ev Evidence) {
	fmt.Fprintf(w, "# Emergency changes: break-glass evidence report\n\n")
	period := "every session in the log"
	if ev.Since != nil {
		period = "sessions opened since " + ev.Since.Format(time.RFC3339)
	}
	state := "chain intact"
	if !ev.Log.Intact {
		state = fmt.Sprintf("**%d break(s) found** (`%s` names them)", len(ev.Log.Breaks), next.AuditVerify(""))
	}
	if n := len(ev.Log.Warnings); n > 0 {
		state += fmt.Sprintf(", %d warning(s) about the head (`%s` names them)", n, next.AuditVerify(""))
	}
	fmt.Fprintf(w, "- Generated: %s, covering %s\n", ev.Generated.Format(time.RFC3339), period)
	fmt.Fprintf(w, "- Audit log: %s, %d records, %s; Jira witnesses %s\n", mdCell(ev.Log.Source), ev.Log.Records, state, ev.Log.Witnesses)
	fmt.Fprintf(w, "- Newest record: %d, hash `%s`\n\n", ev.Log.Newest.Seq, ev.Log.Newest.Hash)
	fmt.Fprintln(w, "| Application | Targets | Opener | Joiners | Reason | Incident | Changed | Opened | Fix live | End | Time to restore | Git revision | Ticket | Reviewer | Verdict | Review delay | Session |")
	fmt.Fprintln(w, "|"+strings.Repeat(" --- |", len(reportColumns)-1))
	reviewed := false
	for _, c := range ev.Changes {
		row := reportRow(c)
		for i := range row {
			row[i] = mdCell(row[i])
		}
		// The reviews, the last column, follow the table one to a line.
		fmt.Fprintf(w, "| %s |\n", strings.Join(row[:len(row)-1], " | "))
		reviewed = reviewed || len(c.Reviews) > 0
	}
	if reviewed {
		fmt.Fprintf(w, "\n## Reviews\n\nEvery review of each reviewed session, oldest first. The verdict in the table is the one that\nstands: a rejection stands until a different reviewer's approval overturns it, saying why, and a\nreview out of those rules (or not by the reviewer role) counts for nothing.\n\n")
		for _, c := range ev.Changes {
			if len(c.Reviews) == 0 {
				continue
			}
			fmt.Fprintf(w, "- %s (%s): %s\n", mdCell(c.Session), mdCell(c.Application.Namespace+"/"+c.Application.Name), mdCell(verdictText(c.Verdict)))
			for _, h := range reviewHistory(c.Reviews) {
				fmt.Fprintf(w, "  - %s\n", mdCell(h))
			}
		}
	}
	s := ev.Summary
	fmt.Fprintf(w, "\n## Summary\n\n- Emergency changes: %d\n", s.Changes)
	fmt.Fprintf(w, "- Per application: %s\n", counts(s.PerApplication))
	fmt.Fprintf(w, "- Per month: %s\n", counts(s.PerMonth))
	fmt.Fprintf(w, "- Median time to restore: %s\n", mdCell(s.MedianTimeToRestore))
	fmt.Fprintf(w, "- Forced: %d (%.1f%% of those restored)\n", s.Forced, s.ShareForced*100)
	fmt.Fprintf(w, "- Reviewed within 48 h: %d (%.1f%% of those restored)\n", s.ReviewedWithin48h, s.ShareReviewedIn48h*100)
	fmt.Fprintf(w, "- Without an approval (never reviewed, or rejected): %d\n", s.Unreviewed)
}

// verdictText is a session's standing verdict, "unreviewed" when none.
func verdictText(v string) string {
	if v == "" {
		return "unreviewed"
	}
	return v
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s (%d)", mdCell(k), m[k])
	}
	return strings.Join(parts, ", ")
}
