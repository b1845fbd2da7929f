package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
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
	cmd.Flags().StringVar(&s.File, "file", "", "read a JSONL export (made with audit log -o jsonl) instead of the cluster")
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
		return audit.OpenExport(s.File)
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
		return fmt.Errorf("no audit records found in file %s (is it an export from `%s`?)", s.File, next.AuditExport())
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
		Args: subcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdAuditLog(factory), newCmdAuditShow(factory), newCmdAuditVerify(factory),
		newCmdAuditReview(factory), newCmdAuditReport(factory), newCmdAuditRepairHead(factory),
		newCmdAuditRestoreLog(factory))
	return cmd
}
