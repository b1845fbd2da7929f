package plugin

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// auditSource opens the store the audit commands read: the cluster's
// ConfigMaps in --audit-namespace, or a JSONL export given with --file.
type auditSource struct {
	*Factory
	Namespace string
	File      string
	mirror    mirrorFlags
}

func (s *auditSource) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.Namespace, "audit-namespace", "argocd", "namespace holding the audit log (Argo CD's own)")
	cmd.Flags().StringVar(&s.File, "file", "", "read a JSONL export (from `audit log -o jsonl`) instead of the cluster")
	s.mirror.add(cmd, "read the log's mirror, s3://BUCKET/PREFIX (controller --mirror), instead of the cluster: no cluster needed")
}

// validate refuses two sources at once.
func (s *auditSource) validate() error {
	if s.File != "" && s.mirror.URL != "" {
		return usageErrorf("--file and --mirror cannot be set at the same time: read one")
	}
	return nil
}

func (s *auditSource) store() (audit.Store, error) {
	if s.File != "" {
		return &audit.FileStore{Path: s.File}, nil
	}
	if s.mirror.URL != "" {
		return s.mirror.open(context.Background(), 0)
	}
	_, client, err := kubeClient(s.configFlags)
	if err != nil {
		return nil, err
	}
	return audit.NewConfigMapStore(client, s.Namespace), nil
}

// empty is, for a verify report of no record and no head, where nothing
// was found and what to check; nil for a log. Nothing is not an intact
// log: an auditor pointed at the wrong place must not be told all is well.
func (s *auditSource) empty(rep audit.Report) error {
	if rep.Records > 0 || rep.Head != nil || !rep.Intact() {
		return nil
	}
	if s.File != "" {
		return fmt.Errorf("no audit records found in file %s (is it an export from `kubectl gitops audit log -o jsonl`?)", s.File)
	}
	if s.mirror.URL != "" {
		return fmt.Errorf("no audit records found in mirror %s (is --mirror right, with the controller's prefix?)", s.mirror.URL)
	}
	return fmt.Errorf("no audit records found in namespace %s (is --audit-namespace right?)", s.Namespace)
}

// explain turns API errors into what the user should do about them.
func (s *auditSource) explain(err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("not allowed to read the audit log in namespace %s: bind the kubectl-gitops auditor role (deploy/rbac/auditor.yaml) to your user or group: %w", s.Namespace, err)
	}
	return err
}

// NewCmdAudit returns the audit command group.
func NewCmdAudit(factory *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read and verify the tamper-evident break-glass audit log",
		Long: `Every break-glass state change is written as a hash-chained record: one
immutable ConfigMap per record in the Applications' namespace. These commands
list, show and verify it, and repair its head.`,
		Args: positional(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdAuditLog(factory), newCmdAuditShow(factory), newCmdAuditVerify(factory),
		newCmdAuditReview(factory), newCmdAuditReport(factory), newCmdAuditRepairHead(factory),
		newCmdAuditRestoreLog(factory))
	return cmd
}

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
	if err := validateOutput(o.Output, auditLogFormats...); err != nil {
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

// AuditShowOptions holds the flags of `audit show`.
type AuditShowOptions struct {
	source auditSource
	ID     string
	Output string
	genericiooptions.IOStreams
}

func newCmdAuditShow(factory *Factory) *cobra.Command {
	o := &AuditShowOptions{source: auditSource{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Print one audit record in full, as stored",
		Long: `Print one audit record in full. ID may be any unique prefix of the record's id
(as audit log prints it). -o json prints the document exactly as stored, so its
hash can be recomputed independently (indented; the hash covers the canonical form).`,
		Example: `  kubectl gitops audit show 20261202-031522-3fa9c1
  kubectl gitops audit show 20261202-0315 -o json`,
		Args: positional(1, "ID"),
		RunE: run(o),
	}
	o.source.addFlags(cmd)
	outputFlag(cmd, &o.Output, "yaml", "json")
	return cmd
}

// Complete takes ID.
func (o *AuditShowOptions) Complete(_ *cobra.Command, args []string) error {
	o.ID = arg(args, 0)
	return nil
}

// Validate checks the flags.
func (o *AuditShowOptions) Validate() error {
	if err := o.source.validate(); err != nil {
		return err
	}
	return validateOutput(o.Output, "yaml", "json")
}

// Run finds the record and prints it.
func (o *AuditShowOptions) Run(ctx context.Context) error {
	store, err := o.source.store()
	if err != nil {
		return err
	}
	var matches []audit.Entry
	var ids []string
	err = store.Walk(ctx, audit.Filter{}, func(e audit.Entry) error {
		recs := audit.Records([]audit.Entry{e})
		if len(recs) == 1 && strings.HasPrefix(recs[0].ID, o.ID) {
			matches = append(matches, e)
			ids = append(ids, recs[0].ID)
		}
		return nil
	})
	if err != nil {
		return o.source.explain(err)
	}
	switch {
	case len(matches) == 0:
		return fmt.Errorf("no audit record has an id starting %q: list them with `kubectl gitops audit log`", o.ID)
	case len(matches) > 1:
		if len(ids) > 5 {
			ids = append(ids[:5], "…")
		}
		return fmt.Errorf("%d audit records have ids starting %q (%s): give more of the id", len(matches), o.ID, strings.Join(ids, ", "))
	}
	doc := matches[0].Doc
	if o.Output == "json" {
		var buf bytes.Buffer
		if err := json.Indent(&buf, doc, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := o.Out.Write(buf.Bytes())
		return err
	}
	out, err := yaml.JSONToYAML(doc)
	if err != nil {
		return err
	}
	_, err = o.Out.Write(out)
	return err
}

// AuditVerifyOptions holds the flags of `audit verify`.
type AuditVerifyOptions struct {
	source auditSource
	Output string
	Jira   bool
	// MirrorOnly checks the mirror alone, with no cluster.
	MirrorOnly bool
	// CheckpointKeys are files of the checkpoint public keys to trust.
	CheckpointKeys []string
	// MirrorBound is how long a record may wait for the mirror.
	MirrorBound time.Duration
	genericiooptions.IOStreams
}

func newCmdAuditVerify(factory *Factory) *cobra.Command {
	o := &AuditVerifyOptions{source: auditSource{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain",
		Long: `Recompute every record's hash and check the chain links, the sequence and the
head, and that each record's actor is the user the API server let create it
(its kubectl-gitops.io/actor annotation). Each break is named: missing
(deleted), altered, reordered, inserted, forged (another person's name on a
record), unlabelled (a record hidden from listings), mutable (a record that
could be edited in place) or relabelled (labels that disagree with the record),
and what the records mean, per session.

A head that does not name the log's end is a warning, not a break: head-ahead,
head-behind, head-mismatch (also each head a writer found wrong and noted in its
record) or head-missing. Writers never believe it and it hides no record; each
warning names its fix, kubectl gitops audit repair-head, for a cluster admin.

With --mirror (the copy the controller keeps in write-once object storage) it
verifies the mirror's chain the same way, names a record object written again
(mirror-rewritten) or hidden by a delete marker (mirror-deleted), checks every
checkpoint against the records and the public keys passed with
--checkpoint-key (a checkpoint signed by any other key is a warning:
checkpoint-unverified; one that does not match, checkpoint-mismatch), and,
unless --mirror-only, compares the cluster's log with it: a record the cluster
lost (missing-in-cluster), one replaced after it was mirrored
(differs-from-mirror), one that never reached the mirror within
--mirror-backlog-bound (unmirrored).

A log the controller pruned (controller --prune-after) starts after a
checkpoint signed at its cut: verify accepts the records before the first as
pruned only when that checkpoint's signature is a key passed with
--checkpoint-key and the first record kept links to its hash (cut-unverified
without a key; missing records, as after any deletion, without the checkpoint).

Exit status: 0 the chain is intact (warnings about the head or not); 1 tampering
found; 2 usage error; 3 the log could not be read, or holds no record at all (no
records and no head: most likely the wrong --audit-namespace or --file).`,
		Example: `  kubectl gitops audit verify
  kubectl gitops audit verify -o json
  kubectl gitops audit verify --file audit.jsonl

  # The auditor's laptop: the mirror alone, checkpoints checked with the public key
  kubectl gitops audit verify --mirror s3://audit-bucket/prod --mirror-only --checkpoint-key checkpoint.pub

  # The cluster's log against its mirror
  kubectl gitops audit verify --mirror s3://audit-bucket/prod --checkpoint-key checkpoint.pub

  # A log the controller pruned: its cut checked with the public key
  kubectl gitops audit verify --checkpoint-key checkpoint.pub

  # Also check the records Jira tickets witnessed (JIRA_URL etc. set)
  kubectl gitops audit verify --jira`,
		Args: positional(0),
		RunE: run(o),
	}
	o.source.addFlags(cmd)
	cmd.Flags().BoolVar(&o.Jira, "jira", false, "also check that the records break-glass tickets witnessed (sequence number and hash) are still in the chain")
	cmd.Flags().BoolVar(&o.MirrorOnly, "mirror-only", false, "with --mirror: check the mirror alone, reading no cluster")
	cmd.Flags().StringArrayVar(&o.CheckpointKeys, "checkpoint-key", nil, "a PEM file of the controller's checkpoint public key(s) to trust (repeatable, one per key id after a rotation)")
	cmd.Flags().DurationVar(&o.MirrorBound, "mirror-backlog-bound", 10*time.Minute, "with --mirror: how long a cluster record may wait for the mirror before it is named unmirrored")
	outputFlag(cmd, &o.Output, "text", "json", "yaml")
	return cmd
}

// printText prints the breaks, then the warnings about the head, then
// one line that sums them up.
func (o *AuditVerifyOptions) printText(rep audit.Report) {
	for _, b := range rep.Breaks {
		fmt.Fprintln(o.Out, printable(b.String()))
	}
	for _, w := range rep.Warnings {
		fmt.Fprintln(o.Out, "warning: "+printable(w.String()))
	}
	warnings := ""
	if n := len(rep.Warnings); n > 0 {
		warnings = fmt.Sprintf("; %d warning(s) about the head", n)
	}
	if !rep.Intact() {
		fmt.Fprintf(o.Out, "chain broken: %d problem(s) in %d records%s\n", len(rep.Breaks), rep.Records, warnings)
		return
	}
	if p := rep.Pruned; p != nil {
		fmt.Fprintf(o.Out, "pruned through record %d: the checkpoint there (%s, signed by key %s) covers the records before the log's first; the mirror holds them\n", p.Through, p.Time.Format(time.RFC3339), p.KeyID)
	}
	fmt.Fprintf(o.Out, "chain intact: %d records, newest %d (hash %.12s)%s\n", rep.Records, rep.Tip.Seq, rep.Tip.Hash, warnings)
	if o.Jira {
		fmt.Fprintf(o.Out, "%d records witnessed in Jira are in the chain as witnessed\n", rep.Witnesses)
	}
}

// witnesses reads the records Jira witnessed.
func witnesses(ctx context.Context) ([]audit.Witness, error) {
	j, err := jiraClient()
	if err != nil {
		return nil, fmt.Errorf("--jira needs Jira configured: %w", err)
	}
	found, err := j.Witnesses(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]audit.Witness, len(found))
	for i, w := range found {
		out[i] = audit.Witness{Where: w.Key, HeadState: w.HeadState}
	}
	return out, nil
}

// Complete has nothing to take: audit verify has no arguments.
func (o *AuditVerifyOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate checks the flags.
func (o *AuditVerifyOptions) Validate() error {
	if err := o.source.validate(); err != nil {
		return err
	}
	if o.source.mirror.URL == "" && o.MirrorOnly {
		return usageErrorf("--mirror-only needs --mirror s3://BUCKET/PREFIX")
	}
	if o.source.File != "" && len(o.CheckpointKeys) > 0 {
		return usageErrorf("--checkpoint-key checks the cluster's or the mirror's checkpoints: a --file export has none")
	}
	if o.source.mirror.URL != "" && o.Jira {
		return usageErrorf("--jira and --mirror cannot be set at the same time: verify the cluster's log with --jira, the mirror with --mirror")
	}
	return validateOutput(o.Output, "text", "json", "yaml")
}

// Run verifies the chain and prints the report.
func (o *AuditVerifyOptions) Run(ctx context.Context) error {
	if o.source.mirror.URL != "" {
		return o.runMirror(ctx)
	}
	store, err := o.source.store()
	if err != nil {
		return &ExitError{Code: ExitCannotTell, Err: err}
	}
	if cm, ok := store.(*audit.ConfigMapStore); ok && isTerminal(o.ErrOut) {
		// A large log takes a while to read: count it on one line of a
		// terminal, and leave no trace of it for scripts.
		cm.Listed = func(n int) { fmt.Fprintf(o.ErrOut, "\rreading the audit log: %d records", n) }
		defer fmt.Fprint(o.ErrOut, "\r\033[K")
	}
	var ws []audit.Witness
	if o.Jira {
		if ws, err = witnesses(ctx); err != nil {
			return &ExitError{Code: ExitCannotTell, Err: err}
		}
		if ws == nil {
			ws = []audit.Witness{}
		}
	}
	keys, err := checkpointKeys(o.CheckpointKeys)
	if err != nil {
		return err
	}
	// Checked as it is read, a page at a time: memory stays flat however
	// long the log grows.
	rep, err := audit.VerifyStore(ctx, store, ws, keys)
	if err != nil {
		return &ExitError{Code: ExitCannotTell, Err: o.source.explain(err)}
	}
	if empty := o.source.empty(rep); empty != nil {
		if o.Output != "text" {
			if err := printStructured(o.Out, o.Output, rep); err != nil {
				return err
			}
		}
		return &ExitError{Code: ExitCannotTell, Err: empty}
	}
	return o.print(rep, nil)
}

// print prints the report (and what was read of a mirror) and says
// whether the chain is intact.
func (o *AuditVerifyOptions) print(rep audit.Report, mirror *audit.MirrorSummary) error {
	rep.Warnings = withFixes(rep.Warnings)
	rep.Mirror = mirror
	if o.Output != "text" {
		if err := printStructured(o.Out, o.Output, rep); err != nil {
			return err
		}
	} else {
		if mirror != nil {
			printMirror(o, mirror)
		}
		o.printText(rep)
	}
	if !rep.Intact() {
		return &ExitError{Code: ExitFailure}
	}
	return nil
}

// runMirror verifies the mirror, alone or against the cluster.
func (o *AuditVerifyOptions) runMirror(ctx context.Context) error {
	keys, err := checkpointKeys(o.CheckpointKeys)
	if err != nil {
		return err
	}
	m, err := o.source.mirror.open(ctx, 0)
	if err != nil {
		return &ExitError{Code: ExitCannotTell, Err: err}
	}
	check := audit.MirrorCheck{Mirror: m, Keys: keys, Bound: o.MirrorBound, Now: time.Now()}
	if !o.MirrorOnly {
		_, client, err := kubeClient(o.source.configFlags)
		if err != nil {
			return &ExitError{Code: ExitCannotTell, Err: err}
		}
		check.Cluster = audit.NewConfigMapStore(client, o.source.Namespace)
	}
	rep, sum, err := check.Verify(ctx)
	if err != nil {
		return &ExitError{Code: ExitCannotTell, Err: o.source.explain(err)}
	}
	if rep.Records == 0 && rep.Intact() {
		return &ExitError{Code: ExitCannotTell, Err: o.source.empty(rep)}
	}
	return o.print(rep, sum)
}
