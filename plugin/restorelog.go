package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// AuditRestoreLogOptions holds the flags of `audit restore-log`.
type AuditRestoreLogOptions struct {
	*Factory
	Namespace string
	mirror    mirrorFlags
	Yes       bool
	Output    string
	genericiooptions.IOStreams
}

func newCmdAuditRestoreLog(factory *Factory) *cobra.Command {
	o := &AuditRestoreLogOptions{Factory: factory, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "restore-log",
		Short: "Rebuild a lost audit log from its mirror",
		Long: `Write back into --audit-namespace every record the mirror holds that the
cluster lacks (a deleted namespace, a lost etcd), each as the immutable
ConfigMap it was, with the actor the API server stamped on it when it was first
written and the kubectl-gitops.io/restored-by annotation naming you, then point
the head at the newest. The mirror's chain is verified first and a broken one
is refused; a record the cluster holds with other bytes than the mirror's is
never overwritten (nothing is written then). Afterwards status, restore and the
report work again.

Only a cluster admin (group system:masters) may write records back: the
shipped admission policy lets no one else stamp another user's name on a record.

Exit status: 0 restored (or nothing to restore); 1 refused; 2 usage error.`,
		Example: `  kubectl gitops audit restore-log --mirror s3://audit-bucket/prod --audit-namespace argocd --yes`,
		Args:    positional(0),
		RunE:    run(o),
	}
	cmd.Flags().StringVar(&o.Namespace, "audit-namespace", "argocd", "namespace to rebuild the audit log in (created when missing)")
	o.mirror.add(cmd, "the log's mirror, s3://BUCKET/PREFIX (controller --mirror) (required)")
	cmd.Flags().BoolVarP(&o.Yes, "yes", "y", false, "do not ask for confirmation")
	outputFlag(cmd, &o.Output, "text", "json", "yaml")
	return cmd
}

// Complete has nothing to take: audit restore-log has no arguments.
func (o *AuditRestoreLogOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate checks the flags.
func (o *AuditRestoreLogOptions) Validate() error {
	if o.mirror.URL == "" {
		return usageErrorf("--mirror s3://BUCKET/PREFIX is required: the mirror the controller writes")
	}
	if !o.Yes && !isTerminal(o.In) {
		return usageErrorf("--yes is required when stdin is not a terminal")
	}
	return nil
}

// Run verifies the mirror, confirms, and writes back what is missing.
func (o *AuditRestoreLogOptions) Run(ctx context.Context) error {
	m, err := o.mirror.open(ctx, 0)
	if err != nil {
		return err
	}
	rep, _, err := audit.MirrorCheck{Mirror: m}.Verify(ctx)
	if err != nil {
		return err
	}
	if !rep.Intact() {
		return fmt.Errorf("the mirror's chain has %d break(s), so nothing was written: `%s` names them", len(rep.Breaks), next.AuditVerifyMirror(o.mirror.URL, "", true))
	}
	if rep.Records == 0 {
		return fmt.Errorf("no audit records found in mirror %s (is --mirror right, with the controller's prefix?)", o.mirror.URL)
	}
	entries, err := m.Entries(ctx, audit.Filter{})
	if err != nil {
		return err
	}
	_, client, err := kubeClient(o.configFlags)
	if err != nil {
		return err
	}
	me, err := argocd.Whoami(ctx, client)
	if err != nil {
		return err
	}
	if !o.Yes {
		what := fmt.Sprintf("Writes the mirror's %d records that namespace %s lacks back into it, as %s.", rep.Records, o.Namespace, me.Username)
		if err := confirmTyped(o.In, o.ErrOut, what, "audit namespace", o.Namespace); err != nil {
			return err
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("creating namespace %s: %w", o.Namespace, err)
	}
	done, err := audit.NewConfigMapStore(client, o.Namespace).Restore(ctx, entries, me.Username)
	switch {
	case errors.Is(err, audit.ErrRestoreConflict):
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%v: `%s` names what differs", err, next.AuditVerifyMirror(o.mirror.URL, o.Namespace, false))}
	case apierrors.IsForbidden(err):
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("only a cluster admin (group system:masters) may write audit records back from the mirror (deploy/policy): %d record(s) were written before the API server refused: %w", len(done.Written), err)}
	case err != nil:
		return err
	}
	if o.Output != "text" {
		return printStructured(o.Out, o.Output, done)
	}
	fmt.Fprintf(o.Out, "restored %d record(s) from %s into namespace %s (%d were there already); the head names record %d (hash %.12s)\n",
		len(done.Written), o.mirror.URL, o.Namespace, done.Present, done.Head.Seq, done.Head.Hash)
	return nil
}
