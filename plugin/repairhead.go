package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// AuditRepairHeadOptions holds the flags of `audit repair-head`.
type AuditRepairHeadOptions struct {
	engineFlags
	Yes    bool
	Output string
	genericiooptions.IOStreams
}

// HeadRepair is what `audit repair-head -o json|yaml` prints: the head
// findings it answered (those of audit verify) and the repair record,
// absent when there was nothing to repair.
type HeadRepair struct {
	Repaired bool          `json:"repaired"`
	Findings []audit.Break `json:"findings"`
	Record   *audit.Record `json:"record,omitempty"`
}

func newCmdAuditRepairHead(factory *Factory) *cobra.Command {
	o := &AuditRepairHeadOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "repair-head",
		Short: "Point the audit log's head back at the log's end (a cluster admin's repair)",
		Long: `The head (ConfigMap kubectl-gitops-audit-head) names the newest record. Writers
never believe a wrong one, and the on-call, auditor and reviewer groups only move
it forward, so a head moved ahead of the log stays there: audit verify warns of it
(head-ahead, head-behind, head-mismatch, head-missing, and the records that found
it wrong). repair-head finds the log's end as an append does, appends
audit.head-repaired (saying what the head said) and points the head at that
record, backwards too; verify is clean again. It does nothing when verify has no
warning about the head.

Only a user outside the on-call, auditor and reviewer groups (a cluster admin) may:
the shipped admission policy refuses anyone else, and nothing is written.

On a terminal it asks you to type the audit namespace; --yes skips that, and is
required when stdin is not a terminal.

Exit status: 0 repaired, or nothing to repair; 1 refused or failed; 2 usage error.`,
		Example: `  # As a cluster admin, after audit verify warned of the head
  kubectl gitops audit repair-head
  kubectl gitops audit repair-head --audit-namespace argocd --yes -o json`,
		Args: positional(0),
		RunE: run(o),
	}
	o.addAuditNamespace(cmd)
	cmd.Flags().BoolVarP(&o.Yes, "yes", "y", false, "do not ask for confirmation")
	outputFlag(cmd, &o.Output, "text", "json", "yaml")
	return cmd
}

// Complete has nothing to take: audit repair-head has no arguments.
func (o *AuditRepairHeadOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate checks the flags.
func (o *AuditRepairHeadOptions) Validate() error {
	if !o.Yes && !isTerminal(o.In) {
		return usageErrorf("--yes is required when stdin is not a terminal")
	}
	return nil
}

// Run checks the head as audit verify does, confirms, and repairs it.
func (o *AuditRepairHeadOptions) Run(ctx context.Context) error {
	engine, err := o.engine()
	if err != nil {
		return err
	}
	rep, err := audit.VerifyStore(ctx, engine.Audit, nil, nil)
	if err != nil {
		return err
	}
	result := HeadRepair{Findings: withFixes(rep.Warnings)}
	if !rep.Intact() {
		warn(o.ErrOut, fmt.Sprintf("the chain itself has %d break(s), which repair-head leaves as they are: `%s` names them", len(rep.Breaks), next.AuditVerify(o.AuditNamespace)))
	}
	if len(result.Findings) == 0 {
		if rep.Records == 0 {
			return fmt.Errorf("no audit records found in namespace %s (is --audit-namespace right?)", o.AuditNamespace)
		}
		if o.Output != "text" {
			return printStructured(o.Out, o.Output, result)
		}
		fmt.Fprintf(o.Out, "the audit head in namespace %s names the newest record, %d: nothing to repair\n", o.AuditNamespace, rep.Tip.Seq)
		return nil
	}
	for _, f := range result.Findings {
		note(o.ErrOut, "%s", f.String())
	}
	// The shipped policy refuses these groups a repair whatever they
	// confirm: said before anything is asked or written.
	if actor, err := engine.Whoami(ctx); err == nil {
		for _, g := range actor.Groups {
			if slices.Contains(audit.HeadGuardedGroups, g) {
				return fmt.Errorf("you are in group %s, which the admission policy (deploy/policy/audit-log.yaml) never lets repair the audit head: nothing was changed; ask a cluster admin to run `%s`", g, next.AuditRepairHead(o.AuditNamespace))
			}
		}
	}
	if !o.Yes {
		what := fmt.Sprintf("Appends audit.head-repaired at the end of the log in %s and points the head at it, backwards too.", o.AuditNamespace)
		if err := confirmTyped(o.In, o.ErrOut, what, "audit namespace", o.AuditNamespace); err != nil {
			return err
		}
	}
	rec, err := engine.RepairAuditHead(ctx)
	if err != nil {
		return o.refused(err, rec)
	}
	result.Repaired, result.Record = true, rec
	if o.Output != "text" {
		return printStructured(o.Out, o.Output, result)
	}
	before := "no head"
	if h := rec.HeadBefore; h != nil {
		before = fmt.Sprintf("record %d (hash %.12s)", h.Seq, h.Hash)
	}
	fmt.Fprintf(o.Out, "repaired the audit head in namespace %s: it named %s; it names record %d now, the audit.head-repaired record by %s\n",
		o.AuditNamespace, printable(before), rec.Seq, printable(rec.Actor.Username))
	return nil
}

// refused says what to do about a repair that failed: rec is the repair
// record when it was written before the failure.
func (o *AuditRepairHeadOptions) refused(err error, rec *audit.Record) error {
	changed := "nothing was changed"
	if rec != nil {
		changed = fmt.Sprintf("the repair was recorded as audit record %d", rec.Seq)
	}
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "repair-head"):
		// The admission policy already says who may and what to ask:
		// said again, the line repeated its sentence.
		return withHint(err, fmt.Errorf("%w (%s; spelt for this log: `%s`)", err, changed, next.AuditRepairHead(o.AuditNamespace)))
	case apierrors.IsForbidden(err):
		return withHint(err, fmt.Errorf("%w: only a cluster admin (a user outside the on-call, auditor and reviewer groups) may repair the audit head, and %s: ask one to run `%s`",
			err, changed, next.AuditRepairHead(o.AuditNamespace)))
	}
	return withHint(err, fmt.Errorf("%w (%s)", err, changed))
}

// withFixes is findings about the head, each saying the command that puts
// it right.
func withFixes(findings []audit.Break) []audit.Break {
	out := make([]audit.Break, len(findings))
	for i, f := range findings {
		f.Fix = next.AuditRepairHead("") + " (a cluster admin)"
		out[i] = f
	}
	return out
}
