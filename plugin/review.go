package plugin

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// AuditReviewOptions holds the flags of `audit review`.
type AuditReviewOptions struct {
	engineFlags
	Request breakglass.ReviewRequest
	Output  string
	genericiooptions.IOStreams
}

func newCmdAuditReview(factory *Factory) *cobra.Command {
	o := &AuditReviewOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "review SESSION (--approve [--overturn] | --reject) --note TEXT",
		Short: "Review a closed break-glass session, as a reviewer who neither opened nor joined it",
		Long: `Append breakglass.reviewed (the verdict, the note, and the reviewer as the
API server names them) to a restored or forced session, and comment on its
ticket. Only the reviewer role (group reviewers, deploy/rbac/reviewer.yaml)
records a review, and it may append review records and nothing else; whoever
opened or joined the session may not review it: an emergency change is
reviewed by someone else.

A rejection stands until an approval by a different reviewer overturns it:
such an approval needs --overturn, and its --note says why; the record names
the rejection it overturns. Every review stays in the log, and audit report
shows them all with the verdict that stands.`,
		Example: `  # What awaits review: never reviewed, or rejected
  kubectl gitops audit log --unreviewed

  kubectl gitops audit review 20261203-031000-ab12c --approve --note "rollback was right; Git fixed in PR 118"

  # Another reviewer overturns a rejection, saying why
  kubectl gitops audit review 20261203-031000-ab12c --approve --overturn --note "the scale-up was tried first: see OPS-7"`,
		Args: positional(1, "SESSION"),
		RunE: run(o),
	}
	o.addEngineFlags(cmd)
	cmd.Flags().BoolVar(&o.Request.Approve, "approve", false, "the change was right")
	cmd.Flags().BoolVar(&o.Request.Reject, "reject", false, "the change was not right (say why in --note)")
	cmd.Flags().BoolVar(&o.Request.Overturn, "overturn", false, "with --approve: overturn the rejection that stands (say why in --note); only a reviewer who did not reject it may")
	cmd.Flags().StringVar(&o.Request.Note, "note", "", "what the review found (required)")
	allowSecretTextFlag(cmd, &o.Request.AllowSecretText, "--note")
	outputFlag(cmd, &o.Output, "text", "json", "yaml")
	return cmd
}

// Complete takes the session from the arguments.
func (o *AuditReviewOptions) Complete(_ *cobra.Command, args []string) error {
	o.Request.Session = arg(args, 0)
	return nil
}

// Validate checks the flags.
func (o *AuditReviewOptions) Validate() error {
	if err := o.Request.Validate(); err != nil {
		return usageError(err)
	}
	return nil
}

// Run records the review.
func (o *AuditReviewOptions) Run(ctx context.Context) error {
	engine, err := o.engine()
	if err != nil {
		return err
	}
	rec, warnings, err := engine.Review(ctx, o.Request)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		warn(o.ErrOut, w)
	}
	if o.Output != "text" {
		return printStructured(o.Out, o.Output, rec)
	}
	if rec.Review.Overturns != "" {
		note(o.Out, "session %s %s by %s, overturning the rejection %s: audit record %d", rec.Session, rec.Review.Verdict, rec.Actor.Username, rec.Review.Overturns, rec.Seq)
		return nil
	}
	note(o.Out, "session %s %s by %s: audit record %d", rec.Session, rec.Review.Verdict, rec.Actor.Username, rec.Seq)
	return nil
}
