package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// AuditVerifyOptions holds the flags of `audit verify`.
type AuditVerifyOptions struct {
	source auditSource
	Output string
	Jira   bool
	// MirrorOnly checks the mirror alone, with no cluster.
	MirrorOnly bool
	// CheckpointKeys are files of the checkpoint public keys to trust.
	CheckpointKeys []string
	// TSACerts is a PEM file of the timestamp authorities' certificates
	// to trust (roots, and intermediates that link to them).
	TSACerts string
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
	cmd.Flags().StringVar(&o.TSACerts, "tsa-certs", "", "with --mirror: a PEM file of the certificate chain of the timestamp authority to trust for checkpoint timestamps (controller --tsa): its self-signed certificates are the roots, the others link a token's signer to them; without it a timestamp is checked against its checkpoint only, and named unverified")
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
	if o.source.mirror.URL == "" && o.TSACerts != "" {
		return usageErrorf("--tsa-certs checks the mirror's checkpoint timestamps: it needs --mirror s3://BUCKET/PREFIX")
	}
	if o.source.File != "" && len(o.CheckpointKeys) > 0 {
		return usageErrorf("--checkpoint-key checks the cluster's or the mirror's checkpoints: a --file export has none")
	}
	if o.source.mirror.URL != "" && o.Jira {
		return usageErrorf("--jira and --mirror cannot be set at the same time: verify the cluster's log with --jira, the mirror with --mirror")
	}
	return nil
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
	trust, err := tsaTrust(o.TSACerts)
	if err != nil {
		return err
	}
	check := audit.MirrorCheck{Mirror: m, Keys: keys, TSA: trust, Bound: o.MirrorBound, Now: time.Now()}
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
