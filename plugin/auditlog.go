package plugin

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// AuditLogOptions holds the flags of `audit log`.
type AuditLogOptions struct {
	source auditSource
	App    string
	Since  time.Duration
	since  string
	Actor  string
	Event  string
	// Unreviewed keeps the records of sessions restored or forced that no
	// approval stands for: never reviewed, or rejected and not overturned.
	Unreviewed bool
	unreviewed map[string]bool
	Output     string
	now        func() time.Time
	genericiooptions.IOStreams
}

var auditLogFormats = []string{"table", "wide", "json", "yaml", "csv", "jsonl"}

func newCmdAuditLog(factory *Factory) *cobra.Command {
	o := &AuditLogOptions{source: auditSource{Factory: factory}, IOStreams: factory.streams, now: time.Now}
	cmd := &cobra.Command{
		Use:   "log",
		Short: "List audit records, oldest first",
		Example: `  # Everything that happened to the web Application this week
  kubectl gitops audit log --app web --since 7d

  # Every forced restore, for a spreadsheet
  kubectl gitops audit log --event breakglass.forced -o csv > forced.csv

  # A verifiable offline export
  kubectl gitops audit log -o jsonl > audit.jsonl
  kubectl gitops audit verify --file audit.jsonl

  # Also check the records Jira tickets witnessed (JIRA_URL etc. set)
  kubectl gitops audit verify --jira`,
		Args: positional(0),
		RunE: run(o),
	}
	o.source.addFlags(cmd)
	cmd.Flags().StringVar(&o.App, "app", "", "only records of this Application")
	cmd.Flags().StringVar(&o.since, "since", "", "only records newer than this duration (e.g. 90m, 24h, 7d)")
	cmd.Flags().StringVar(&o.Actor, "actor", "", "only records by this user (as the API server names them)")
	cmd.Flags().StringVar(&o.Event, "event", "", "only records of this event type (e.g. breakglass.patched)")
	cmd.Flags().BoolVar(&o.Unreviewed, "unreviewed", false, "only records of sessions restored or forced with no approval standing: never reviewed, or rejected and not overturned (audit review)")
	outputFlag(cmd, &o.Output, auditLogFormats...)
	return cmd
}

// Complete reads --since.
func (o *AuditLogOptions) Complete(*cobra.Command, []string) (err error) {
	o.Since, err = sinceFlag(o.since)
	return err
}

// Validate checks the flags.
func (o *AuditLogOptions) Validate() error {
	if err := o.source.validate(); err != nil {
		return err
	}
	if o.Event != "" && !knownEvent(o.Event) {
		names := make([]string, len(audit.Events))
		for i, e := range audit.Events {
			names[i] = string(e)
		}
		return usageErrorf("--event %q is not an audit event: use one of %s", o.Event, strings.Join(names, ", "))
	}
	return nil
}

func knownEvent(name string) bool {
	for _, e := range audit.Events {
		if string(e) == name {
			return true
		}
	}
	return false
}

// parseSince accepts Go durations and a whole number of days ("7d").
// sinceFlag reads a --since value ("" is 0: no bound) as a usage error.
func sinceFlag(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := parseSince(s)
	if err != nil {
		return 0, usageErrorf("--since %q: %v (use e.g. 90m, 24h or 7d)", s, err)
	}
	return d, nil
}

func parseSince(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, errors.New("days must be a positive whole number")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d <= 0 {
		err = errors.New("must be positive")
	}
	return d, err
}

// Run lists the matching records.
func (o *AuditLogOptions) Run(ctx context.Context) error {
	store, err := o.source.store()
	if err != nil {
		return err
	}
	if o.Unreviewed {
		// Which sessions await review takes the whole log first.
		entries, err := store.Entries(ctx, audit.Filter{})
		if err != nil {
			return o.source.explain(err)
		}
		_, sessions := audit.Legal(audit.Trusted(entries))
		o.unreviewed = map[string]bool{}
		for _, s := range sessions.Unreviewed() {
			o.unreviewed[s.ID] = true
		}
	}
	// Printed as it is read, a page at a time: memory stays flat however
	// long the log grows.
	out := o.printer()
	err = store.Walk(ctx, audit.Filter{App: o.App, Event: audit.Event(o.Event)}, func(e audit.Entry) error {
		recs := audit.Records([]audit.Entry{e})
		if len(recs) == 0 || !o.matches(recs[0]) {
			return nil
		}
		return out.add(e, recs[0])
	})
	if err != nil {
		return o.source.explain(err)
	}
	return out.close()
}

// A recordPrinter prints audit records one at a time in one format.
type recordPrinter struct {
	add   func(audit.Entry, *audit.Record) error
	close func() error
}

// tablePage is how many rows the table aligns together before printing
// them: a long log streams in aligned blocks instead of being held whole.
const tablePage = 1000

func (o *AuditLogOptions) printer() recordPrinter {
	switch o.Output {
	case "json", "yaml":
		l := &listWriter{w: o.Out, format: o.Output}
		return recordPrinter{add: func(_ audit.Entry, r *audit.Record) error { return l.add(r) }, close: l.close}
	case "jsonl":
		return recordPrinter{add: func(e audit.Entry, _ *audit.Record) error { return audit.WriteJSONL(o.Out, []audit.Entry{e}) }, close: func() error { return nil }}
	case "csv":
		w := csv.NewWriter(o.Out)
		w.UseCRLF = true // RFC 4180
		started := false
		header := func() error {
			if started {
				return nil
			}
			started = true
			return w.Write(auditCSVColumns)
		}
		return recordPrinter{
			add: func(_ audit.Entry, r *audit.Record) error {
				if err := header(); err != nil {
					return err
				}
				return w.Write(auditCSVRow(r))
			},
			close: func() error {
				if err := header(); err != nil {
					return err
				}
				w.Flush()
				return w.Error()
			},
		}
	}
	wide := o.Output == "wide"
	var t *table
	rows := 0
	return recordPrinter{
		add: func(_ audit.Entry, r *audit.Record) error {
			if t == nil {
				t = auditTable(o.Out, wide)
			}
			writeAuditRow(t, r, wide)
			if rows++; rows%tablePage == 0 {
				return t.flush()
			}
			return nil
		},
		close: func() error {
			if t == nil {
				fmt.Fprintln(o.ErrOut, "no audit records match")
				return nil
			}
			return t.flush()
		},
	}
}

func (o *AuditLogOptions) matches(r *audit.Record) bool {
	if o.unreviewed != nil && !o.unreviewed[r.Session] {
		return false
	}
	switch {
	case o.App != "" && (r.Application == nil || r.Application.Name != o.App):
		return false
	case o.Event != "" && string(r.Event) != o.Event:
		return false
	case o.Actor != "" && r.Actor.Username != o.Actor:
		return false
	case o.Since > 0 && r.Time.Before(o.now().Add(-o.Since)):
		return false
	}
	return true
}

func appName(r *audit.Record) string {
	if r.Application == nil {
		return ""
	}
	return r.Application.Namespace + "/" + r.Application.Name
}

func targetName(r *audit.Record) string {
	if r.Target == nil {
		return ""
	}
	return r.Target.String()
}

// auditTable starts the audit log's table.
func auditTable(out io.Writer, wide bool) *table {
	header := []string{"TIME", "EVENT", "APP", "ACTOR", "TARGET", "OUTCOME", "ID"}
	if wide {
		header = append(header, "SESSION", "TICKET", "REASON", "HASH")
	}
	return newTable(out, header...)
}

func writeAuditRow(t *table, r *audit.Record, wide bool) {
	row := []string{r.Time.UTC().Format(time.RFC3339), string(r.Event), appName(r), r.Actor.Username, dash(targetName(r)), r.Outcome.Status, r.ID}
	if wide {
		ticket := ""
		if r.Ticket != nil {
			ticket = r.Ticket.Key
		}
		row = append(row, dash(r.Session), dash(ticket), dash(oneLine(r.Reason, 60)), r.Hash[:min(12, len(r.Hash))])
	}
	t.row(row...)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table row on one line whatever the user typed.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// auditCSVColumns are stable: scripts may rely on their order.
var auditCSVColumns = []string{"id", "seq", "time", "event", "session", "actor", "application", "project", "cluster", "target", "reason", "incident", "ticket", "git_revision", "outcome", "error", "prev", "hash"}

// auditCSVRow is r as a row of auditCSVColumns.
func auditCSVRow(r *audit.Record) []string {
	var project, cluster, ticket, rev string
	if r.Application != nil {
		project = r.Application.Project
	}
	if r.Cluster != nil {
		cluster = r.Cluster.Server
	}
	if r.Ticket != nil {
		ticket = r.Ticket.Key
	}
	if r.Git != nil {
		rev = r.Git.Revision
	}
	row := []string{r.ID, strconv.FormatUint(r.Seq, 10), r.Time.UTC().Format(time.RFC3339Nano), string(r.Event), r.Session, r.Actor.Username,
		appName(r), project, cluster, targetName(r), r.Reason, r.Incident, ticket, rev, r.Outcome.Status, r.Outcome.Error, r.Prev, r.Hash}
	for i := range row {
		row[i] = csvCell(row[i])
	}
	return row
}
