package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
)

// DriftOptions holds the flags of `kubectl gitops drift`.
type DriftOptions struct {
	engineFlags
	App           string
	AllNamespaces bool
	Project       string
	Selector      string
	Output        string
	ExitCode      exitCode
	ManagerClass  []string
	OwnerKey      string
	// Propose moves the manual and pipeline drift of App into Git.
	Propose bool
	DryRun  bool
	Yes     bool
	proposeFlags
	genericiooptions.IOStreams
}

var driftFormats = []string{"table", "wide", "json", "yaml"}

// NewCmdDrift returns the drift command.
func NewCmdDrift(factory *Factory) *cobra.Command {
	o := &DriftOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "drift [APP]",
		Short: "Show live fields that differ from Git, who changed them, and what to do",
		Long: `For each Application, list every live field that differs from Git's target
state, who last wrote it (from the live object's managedFields), its class, and
the response that fits:

  break-glass  a patch of an open session: bring Git up, then restore
  manual       a person's kubectl: move the value into Git, or sync it away
  pipeline     a deploy tool or CI job: move the change into Git
  controller   an operator or controller owns the field: remove it from the
               manifests, or ignore it (managedFieldsManagers)
  defaulted    no manager owns it (defaulting, admission): an ignoreDifferences entry
  argocd       Argo CD wrote it last: a sync is running or failed

With the Argo CD API (ARGOCD_SERVER, or your argocd login) fields are compared
after Argo CD's own normalisation and ignoreDifferences. Without it, only the
resources Argo CD reports OutOfSync are listed, attributed to their last writer.`,
		Example: `  kubectl gitops drift web
  kubectl gitops drift -A -o wide
  # A scheduled check: exit 0 without drift, 1 with drift, 3 when it could not tell
  kubectl gitops drift -A -o json --exit-code
  # Move the hand-made and pipeline changes of web into Git, as a pull request
  GITHUB_TOKEN=... kubectl gitops drift web --propose`,
		Args:              positional(0, "APP"),
		ValidArgsFunction: o.completeApplications(false),
		RunE:              run(o),
	}
	o.addAppNamespace(cmd)
	o.addEngineFlags(cmd)
	addAllNamespaces(cmd, &o.AllNamespaces, "Applications")
	cmd.Flags().StringVar(&o.Project, "project", "", "only Applications of this project")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "only Applications with these labels (as kubectl -l)")
	o.ExitCode.register(cmd, "exit 0 without drift, 1 with drift, 3 when drift could not be read")
	cmd.Flags().StringArrayVar(&o.ManagerClass, "manager-class", nil, "class a field manager: PREFIX=CLASS (repeatable; before the built-in table), e.g. my-deployer=pipeline")
	cmd.Flags().StringVar(&o.OwnerKey, "owner-key", drift.OwnerLabel, "Application label naming whom to page (a label: the break-glass group cannot change it)")
	cmd.Flags().BoolVar(&o.Propose, "propose", false, "move APP's manual and pipeline drift into Git: its live values written into the source that renders them, verified, pushed on a branch with your own Git credentials, and proposed as a pull or merge request (as propose does; needs the Argo CD API)")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "with --propose: compute and verify the change and print it; push nothing")
	cmd.Flags().BoolVarP(&o.Yes, "yes", "y", false, "with --propose: push the branch and open the request (a value pushed to Git stays in its history: see it first with --dry-run)")
	o.proposeFlags.addWithProject(cmd, "git-project")
	outputFlag(cmd, &o.Output, driftFormats...)
	return cmd
}

// Complete takes APP.
func (o *DriftOptions) Complete(_ *cobra.Command, args []string) error {
	o.App = arg(args, 0)
	return nil
}

// Validate checks the flags.
func (o *DriftOptions) Validate() error {
	if err := allNamespacesWithApp(o.App, o.AllNamespaces, "list"); err != nil {
		return err
	}
	switch {
	case o.Propose && (o.App == "" || o.AllNamespaces):
		return usageErrorf("--propose moves one Application's drift into Git: name APP, without -A")
	case !o.Propose && (o.DryRun || o.Yes || o.proposeFlags.given()):
		return usageErrorf("--dry-run, --yes, --provider, --api-url and --git-project go with --propose")
	case o.Propose && !o.DryRun && !o.Yes:
		return usageErrorf("--propose pushes live values into Git, where they stay: see the change with --dry-run, then add --yes")
	}
	if err := o.proposeFlags.validate(); err != nil {
		return err
	}
	_, err := o.managers()
	return err
}

// managers is the manager-to-class table: --manager-class first.
func (o *DriftOptions) managers() ([]drift.ManagerClass, error) {
	classes := map[string]bool{}
	for _, c := range []drift.Class{drift.BreakGlass, drift.Manual, drift.Pipeline, drift.Controller, drift.Defaulted, drift.ArgoCD, drift.Unknown, drift.Deleted} {
		classes[string(c)] = true
	}
	var table []drift.ManagerClass
	for _, v := range o.ManagerClass {
		prefix, class, ok := strings.Cut(v, "=")
		if !ok || prefix == "" || !classes[class] {
			return nil, usageErrorf("--manager-class %q: use PREFIX=CLASS, CLASS one of manual, pipeline, controller, defaulted, break-glass, argocd", v)
		}
		table = append(table, drift.ManagerClass{Prefix: prefix, Class: drift.Class(class)})
	}
	return append(table, drift.DefaultManagerClasses...), nil
}

// Run reads the Applications, their drift, and prints it.
func (o *DriftOptions) Run(ctx context.Context) (err error) {
	defer cannotTell(&err, bool(o.ExitCode))
	engine, err := o.engine()
	if err != nil {
		return err
	}
	argo, err := o.argoServer()
	if err != nil {
		return err
	}
	query := appQuery(o.App, o.AppNamespace, o.AllNamespaces)
	query.Selector, query.Project = o.Selector, o.Project
	apps, err := engine.Apps(ctx, query)
	if err != nil {
		return err
	}
	managers, _ := o.managers()
	reports, err := drift.Find(ctx, &engine.Client, apps, drift.Options{Argo: argo, Managers: managers, OwnerKey: o.OwnerKey, Patched: breakglass.PatchedBy})
	if err != nil {
		return err
	}
	drifted := 0
	for _, r := range reports {
		drifted += len(r.Fields)
	}
	if o.Propose {
		return o.propose(ctx, engine, reports)
	}
	if err := o.print(reports); err != nil {
		return err
	}
	incomplete := false
	for _, r := range reports {
		incomplete = incomplete || r.Incomplete
	}
	partial := noneSelected(o.ErrOut, query, len(apps))
	if incomplete {
		partial = errors.New("part of the drift could not be read (see the notes): no drift found is not the whole truth")
	}
	return o.ExitCode.answer(drifted > 0, partial)
}

// appQuery selects a command's Applications: APP in --app-namespace, or
// every Application of --app-namespace, or of all namespaces with -A.
func appQuery(app, namespace string, all bool) argocd.AppQuery {
	if all && app == "" {
		namespace = ""
	}
	return argocd.AppQuery{Namespace: namespace, Name: app}
}

func (o *DriftOptions) print(reports []*drift.Report) error {
	if o.Output == "json" || o.Output == "yaml" {
		return printStructured(o.Out, o.Output, reports)
	}
	header := []string{"APP", "RESOURCE", "FIELD", "MANAGER", "SINCE", "CLASS", "OWNER"}
	if o.Output == "wide" {
		header = append(header, "LIVE", "GIT", "CONTRACT", "RESPONSE")
	}
	var t *table
	rows := 0
	for _, r := range reports {
		for _, f := range r.Fields {
			if rows == 0 {
				t = newTable(o.Out, header...)
			}
			rows++
			since := "-"
			if f.Since != nil {
				since = age(*f.Since)
			}
			row := []string{r.App.Name, f.Resource.String(), dash(f.Path), dash(f.Manager), since, string(f.Class), f.Owner}
			if o.Output == "wide" {
				row = append(row, jsonOrDash(f.Live), jsonOrDash(f.Git), dash(f.Contract), f.Response)
			}
			t.row(row...)
		}
	}
	if t != nil {
		if err := t.flush(); err != nil {
			return err
		}
	}
	modes := map[string]int{}
	for _, r := range reports {
		modes[r.Mode]++
		for _, n := range r.Notes {
			note(o.ErrOut, "note: %s: %s", r.App.Name, n)
		}
	}
	if rows == 0 {
		fmt.Fprintf(o.ErrOut, "no drift in %d application(s)\n", len(reports))
	}
	if modes["resource"] > 0 {
		note(o.ErrOut, "note: %d application(s) compared by resource only: configure the Argo CD API (ARGOCD_SERVER or argocd login) for field-level drift", modes["resource"])
	}
	return nil
}

func jsonOrDash(v any) string {
	if v == nil {
		return "-"
	}
	return jsonText(v)
}

// plainRune keeps a field manager's name (any writer picks it) from
// reading as markdown in the request's description.
func plainRune(r rune) rune {
	if strings.ContainsRune("`*_[]()<>#|\\!", r) || r < ' ' {
		return '?'
	}
	return r
}

// proposed is the moved fields: what drift --propose moves into Git.
var proposed = map[drift.Class]bool{drift.Manual: true, drift.Pipeline: true}

// propose moves the report's manual and pipeline drift into Git. Its
// drift is printed first; with -o json|yaml, both as one document.
func (o *DriftOptions) propose(ctx context.Context, engine *breakglass.Engine, reports []*drift.Report) error {
	if len(reports) != 1 {
		return fmt.Errorf("%w: %q in namespace %s", argocd.ErrAppNotFound, o.App, o.AppNamespace)
	}
	r := reports[0]
	if r.Mode != "field" {
		return fmt.Errorf("%w: --propose needs each drifted field and its live value, which only the Argo CD API compares: set ARGOCD_SERVER (a read-only account is enough) or argocd login", breakglass.ErrCannotPropose)
	}
	req := breakglass.DriftProposeRequest{ProposeRequest: breakglass.ProposeRequest{App: o.App, DryRun: o.DryRun, ProviderFor: o.proposeFlags.provider}}
	for _, f := range r.Fields {
		if proposed[f.Class] && f.Path != "" && f.Session == "" {
			req.Fields = append(req.Fields, breakglass.DriftField{Target: f.Resource, Path: f.Path, Git: f.Git, Why: fmt.Sprintf("%s, by field manager %s (as it names itself)", f.Class, strings.Map(plainRune, dash(f.Manager)))})
		}
	}
	p, err := engine.ProposeDrift(ctx, req)
	if o.Output == "json" || o.Output == "yaml" {
		if err != nil {
			return err
		}
		return printStructured(o.Out, o.Output, struct {
			Drift    []*drift.Report      `json:"drift"`
			Proposal *breakglass.Proposed `json:"proposal"`
		}{reports, p})
	}
	if perr := o.print(reports); perr != nil {
		return perr
	}
	return printProposed(p, err, "text", o.IOStreams)
}
