package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

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
	return nil
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
		return fmt.Errorf("no audit record has an id starting %q: list them with `%s`", o.ID, next.AuditLogAll())
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
