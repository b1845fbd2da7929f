package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// BreakglassOptions holds the flags of `kubectl gitops breakglass`.
type BreakglassOptions struct {
	engineFlags
	Request   breakglass.Request
	PatchFile string
	Images    []string
	Replicas  int32
	// AutoRestore is --auto-restore, taken only when given.
	AutoRestore bool
	DryRun      bool
	Yes         bool
	Output      string
	// Propose proposes the fix in Git right after it is live.
	Propose bool
	proposeFlags
	genericiooptions.IOStreams
}

// NewCmdBreakglass returns the breakglass command.
func NewCmdBreakglass(factory *Factory) *cobra.Command {
	o := &BreakglassOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "breakglass [APP [TARGET]]",
		Short: "Pause an Application's sync, keeping its policy, and patch a live resource",
		Long: `Pause the Argo CD Application APP's automated sync (its exact policy is saved in
the session), apply an emergency patch to TARGET (KIND/NAME, one of APP's
managed resources), and write an audit record before and after each change.

TARGET lives in -n NAMESPACE, else in the Application's destination namespace.
Nothing changes until every check passed and a server-side dry run of the patch
succeeded; --dry-run stops there and prints the plan and the diff.

In a terminal, whatever is missing is asked for: leave out APP and TARGET to
pick them from the Applications and their managed resources.`,
		Example: `  # Roll the web container back to the last good image
  kubectl gitops breakglass web deployment/web --image web=registry.example/web:1.2.2 \
    --reason "5xx spike after 1.2.3" --incident INC-42 --yes

  # Scale out, showing the plan first
  kubectl gitops breakglass web deploy/web --replicas 6 --reason "load" --dry-run

  # Any patch kubectl patch would take
  kubectl gitops breakglass web deployment/web --type json \
    --patch '[{"op":"replace","path":"/spec/replicas","value":4}]' --reason "load" -y

  # A second fix in the open session; its ticket gets a comment
  kubectl gitops breakglass web deployment/web --replicas 8 --reason "still hot" --join -y

  # Track it on the incident's existing Jira issue instead of a new one
  kubectl gitops breakglass web deployment/web --replicas 6 --reason "load" --ticket OPS-42 -y

  # An Application deploying to another cluster, through that cluster's context
  kubectl gitops breakglass web deployment/web --replicas 6 --reason "load" --target-context prod-eu -y

  # In a terminal: pick the Application and resource, answer the rest
  kubectl gitops breakglass`,
		Args:              positional(0, "APP", "TARGET"),
		Annotations:       map[string]string{takesNamespace: "TARGET's namespace"},
		ValidArgsFunction: o.completeBreakglass,
		RunE:              run(o),
	}
	f := cmd.Flags()
	f.StringVar(&o.Request.Patch.Body, "patch", "", "the patch, JSON or YAML")
	f.StringVar(&o.PatchFile, "patch-file", "", "read the patch from this file")
	f.StringVar(&o.Request.Patch.Type, "type", "strategic", "patch type: strategic, merge or json")
	f.StringArrayVar(&o.Images, "image", nil, "set a container's image: CONTAINER=IMAGE (repeatable)")
	f.Int32Var(&o.Replicas, "replicas", 0, "set spec.replicas")
	f.StringVar(&o.Request.Reason, "reason", "", "why (required; recorded in the audit log)")
	f.StringVar(&o.Request.Incident, "incident", "", "incident id, recorded in the audit log and put on the ticket")
	allowSecretTextFlag(cmd, &o.Request.AllowSecretText, "--reason and --incident")
	f.StringVar(&o.Request.Ticket, "ticket", "", "attach to this existing Jira issue (KEY-123) instead of filing a new one")
	f.StringVar(&o.Request.TargetContext, "target-context", "", "kubeconfig context of the destination cluster, when it is not Argo CD's (default: the context whose server is the destination's)")
	f.BoolVar(&o.Request.Join, "join", false, "patch within the Application's open session (its ticket gets a comment)")
	f.DurationVar(&o.Request.Expires, "expires", 0, "how long the pause may last, e.g. 2h (default and maximum: the target namespace's "+drift.ContractMaxPause+"; without one, no expiry)")
	f.StringVar(&o.Request.Hold, "hold", "", "how the fix is held: app (pause sync and hold the patched fields through every sync, manual ones included), sync (pause sync only) or fields (hold the patched fields, automated sync stays on; needs the Argo CD API) (default: the target namespace's "+drift.ContractHold+", else app where the Argo CD API is configured, else sync)")
	f.BoolVar(&o.AutoRestore, "auto-restore", false, "restore sync with no person once Git has caught up, by the in-cluster controller (default: the namespace's "+drift.ContractAutoRestore+", else no)")
	o.addAppNamespace(cmd)
	o.addEngineFlags(cmd)
	f.BoolVar(&o.Request.NoTerminate, "no-terminate", false, "refuse, instead of terminating, a sync operation that is running")
	f.BoolVar(&o.Propose, "propose", false, "once the fix is live, propose it in Git as kubectl gitops propose does (with --provider, --api-url, --project); the session is marked, so the in-cluster controller proposes it if this run does not")
	o.proposeFlags.add(cmd)
	f.BoolVar(&o.DryRun, "dry-run", false, "check everything and print the plan and the diff; change nothing")
	f.BoolVarP(&o.Yes, "yes", "y", false, "do not ask for confirmation")
	outputFlag(cmd, &o.Output, "text", "json", "yaml")
	return cmd
}

// appRef is the Application the command names, for hints.
func (o *BreakglassOptions) appRef() audit.AppRef {
	return audit.AppRef{Namespace: o.AppNamespace, Name: o.Request.App}
}

// Complete fills the request from arguments, files and the namespace flag.
func (o *BreakglassOptions) Complete(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		o.Request.App = args[0]
	}
	if len(args) > 1 {
		o.Request.Target = args[1]
	}
	if ns, explicit, err := o.configFlags.ToRawKubeConfigLoader().Namespace(); err == nil && explicit {
		o.Request.Namespace = ns
	}
	if o.PatchFile != "" {
		if o.Request.Patch.Body != "" {
			return usageErrorf("--patch and --patch-file cannot both be set: use one")
		}
		data, err := readPatchFile(o.PatchFile)
		if err != nil {
			return usageErrorf("--patch-file %s: %v", o.PatchFile, err)
		}
		o.Request.Patch.Body = string(data)
	}
	images, err := breakglass.ParseImages(o.Images)
	if err != nil {
		return usageError(err)
	}
	o.Request.Patch.Images = images
	if cmd.Flags().Changed("replicas") {
		r := o.Replicas
		o.Request.Patch.Replicas = &r
	}
	if cmd.Flags().Changed("auto-restore") {
		auto := o.AutoRestore
		o.Request.AutoRestore = &auto
	}
	// The session is marked, so that the controller proposes the fix
	// should this run not.
	o.Request.Propose = o.Propose
	return nil
}

// Validate rejects incomplete or malformed input before contacting anything.
func (o *BreakglassOptions) Validate() error {
	if missing := o.missingInput(); missing != "" {
		if !o.interactive() {
			return usageErrorf("%s", missing)
		}
	} else if err := o.Request.Validate(); err != nil {
		return usageError(err)
	}
	if !o.DryRun && !o.Yes && !isTerminal(o.In) {
		return usageErrorf("--yes is required when stdin is not a terminal (or use --dry-run to see the plan)")
	}
	if !o.Propose && o.proposeFlags.given() {
		return usageErrorf("--provider, --api-url and --project go with --propose")
	}
	return o.proposeFlags.validate()
}

// readPatchFile reads at most breakglass.MaxPatchBytes: a patch file that
// is larger (or endless, like /dev/zero) is refused, never read to the end.
func readPatchFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, breakglass.MaxPatchBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > breakglass.MaxPatchBytes {
		return nil, fmt.Errorf("%w: patch in smaller steps", breakglass.ErrPatchTooLarge)
	}
	return data, nil
}

// isTerminal is whether stream is a terminal; tests replace it to answer
// prompts from a buffer.
var isTerminal = func(stream any) bool {
	f, ok := stream.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// interactive is whether breakglass may ask: stdin and stdout are a
// terminal, and so is stderr, where the forms are drawn; --yes was not
// given.
func (o *BreakglassOptions) interactive() bool {
	return !o.Yes && isTerminal(o.In) && isTerminal(o.Out) && isTerminal(o.ErrOut)
}

// Run plans, confirms and executes.
func (o *BreakglassOptions) Run(ctx context.Context) (err error) {
	engine, err := o.engine()
	if err != nil {
		return err
	}
	if o.missingInput() != "" {
		if err := o.pickTarget(ctx, engine); err != nil {
			return err
		}
		if err := engine.CheckAccess(ctx, o.Request); err != nil {
			return err
		}
		if err := o.askMissing(); err != nil {
			return err
		}
	}
	if server, err := o.argoServer(); err == nil && server != nil {
		o.Request.FieldLevel = true
	}
	plan, err := engine.Plan(ctx, o.Request)
	if err != nil {
		return err
	}
	if isTerminal(o.ErrOut) {
		// Progress for a person watching; scripts get the result only.
		engine.Progress = func(msg string) { note(o.ErrOut, "%s", msg) }
	}
	if o.Output == "text" {
		o.printPlan(plan)
	}
	for _, w := range plan.Warnings {
		warn(o.ErrOut, w)
	}
	if o.DryRun {
		if o.Output != "text" {
			return printStructured(o.Out, o.Output, newPlanView(plan))
		}
		fmt.Fprintln(o.Out, "dry run: nothing was changed")
		return nil
	}
	if !o.Yes {
		if err := o.confirm(plan.App.Name); err != nil {
			return err
		}
	}
	res, err := engine.Execute(ctx, plan)
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		warn(o.ErrOut, w)
	}
	if o.Output != "text" {
		if o.Propose {
			proposed, err := engine.Propose(ctx, breakglass.ProposeRequest{App: plan.App.Name, ProviderFor: o.proposeFlags.provider})
			o.proposalTrouble(proposed, err)
			return printStructured(o.Out, o.Output, struct {
				Session  *breakglass.Session  `json:"session"`
				Proposal *breakglass.Proposed `json:"proposal,omitempty"`
			}{res.Session, proposed})
		}
		return printStructured(o.Out, o.Output, res.Session)
	}
	if res.Session.TerminatedSync != "" {
		fmt.Fprintf(o.Out, "terminated the sync operation that started %s, so it cannot apply Git over the fix\n", res.Session.TerminatedSync)
	}
	switch {
	case plan.Join != nil:
		fmt.Fprintf(o.Out, "patched %s within session %s (%s stays held)\n", plan.Target, printable(res.Session.ID), plan.App.Name)
	case plan.Hold == breakglass.HoldFields:
		fmt.Fprintf(o.Out, "held the patched fields of %s in session %s (automated sync stays on) and patched %s\n", plan.App.Name, res.Session.ID, plan.Target)
	default:
		fmt.Fprintf(o.Out, "paused %s (saved policy in session %s; %s) and patched %s\n", plan.App.Name, res.Session.ID, pauseShort(plan), plan.Target)
	}
	switch s := res.Session; {
	case s.Ticket != "" && s.TicketPending == "":
		fmt.Fprintf(o.Out, "ticket %s: %s\n", printable(s.Ticket), printable(s.TicketURL))
	case s.TicketPending != "":
		fmt.Fprintln(o.Out, "ticket queued: `"+next.TicketSync()+"` files it once Jira is configured and reachable")
	}
	if o.Propose {
		err := propose(ctx, engine, o.proposeFlags, breakglass.ProposeRequest{App: plan.App.Name}, "text", o.IOStreams)
		o.proposalTrouble(nil, err)
		if err == nil {
			fmt.Fprintf(o.Out, "next: merge the proposal; `%s` (or the controller, with --auto-restore) restores once Argo CD has caught up\n", next.Restore(plan.App.Namespace, plan.App.Name))
			return nil
		}
	}
	fmt.Fprintf(o.Out, "next: fix Git (`%s` proposes the fix as a pull request), then `%s`\n", next.Propose(plan.App.Namespace, plan.App.Name), next.Restore(plan.App.Namespace, plan.App.Name))
	return nil
}

// proposalTrouble warns of a proposal that failed after the fix went
// live: the break-glass itself succeeded (as with Jira down), and propose
// can be run again.
func (o *BreakglassOptions) proposalTrouble(p *breakglass.Proposed, err error) {
	if p != nil {
		for _, w := range p.Warnings {
			warn(o.ErrOut, w)
		}
	}
	if err != nil {
		warn(o.ErrOut, fmt.Sprintf("the fix is live, but it was not proposed in Git: %v; the session is marked --propose, so the in-cluster controller proposes it if it runs with Git credentials; else run `%s` once that is fixed", explain(err, "propose", o.appRef()), next.Propose(o.appRef().Namespace, o.Request.App)))
	}
}

func (o *BreakglassOptions) printPlan(p *breakglass.Plan) {
	before, _ := json.Marshal(p.SyncPolicyBefore)
	after, _ := json.Marshal(p.SyncPolicyAfter)
	fmt.Fprintf(o.Out, "Application: %s/%s (project %s, %s)\n", p.App.Namespace, p.App.Name, p.App.Project, argocd.DescribeGit(p.Git))
	fmt.Fprintf(o.Out, "Target:      %s in namespace %s\n", p.Target, p.Target.Namespace)
	if p.TargetContext != "" {
		fmt.Fprintf(o.Out, "Cluster:     %s (kubeconfig context %s)\n", p.Cluster, p.TargetContext)
	}
	fmt.Fprintf(o.Out, "Actor:       %s\n", p.Actor.Username)
	if p.Join != nil {
		fmt.Fprintf(o.Out, "Joins:       session %s by %s since %s (ticket %s)\n", printable(p.Join.ID), printable(p.Join.OpenedBy), p.Join.OpenedAt.Format(time.RFC3339), printable(dash(p.Join.Ticket)))
	}
	if p.Ticket != nil {
		fmt.Fprintf(o.Out, "Ticket:      %s (existing; gets the details as a comment)\n", p.Ticket.Key)
	}
	if p.Join != nil {
		fmt.Fprintf(o.Out, "Sync policy: %s, stays paused (the session saved the original)\n", before)
	} else {
		fmt.Fprintf(o.Out, "Sync policy: %s -> %s (saved; restore writes it back)\n", before, after)
		fmt.Fprintf(o.Out, "Pause:       %s\n", p.PauseMechanism)
		fmt.Fprintf(o.Out, "Hold:        %s\n", holdText(p.Hold))
		if p.PauseFor > 0 {
			fmt.Fprintf(o.Out, "Expires:     after %s (sync stays paused until Git has caught up and it is restored)\n", p.PauseFor)
		}
		if p.AutoRestore {
			fmt.Fprintln(o.Out, "Restores:    by itself once Git has caught up (the in-cluster controller, by restore's rule)")
		}
	}
	for _, parent := range p.Parents {
		fmt.Fprintf(o.Out, "Also pauses: parent application %s, which self-heals %s and would undo the pause (restored together)\n", parent, p.App.Name)
	}
	fmt.Fprintln(o.Out, "Changes:")
	for _, c := range p.Changes {
		b, _ := json.Marshal(c.Before)
		a, _ := json.Marshal(c.After)
		fmt.Fprintf(o.Out, "  %s: %s -> %s\n", printable(c.Path), printable(p.Redact(string(b))), printable(p.Redact(string(a))))
	}
	fmt.Fprintln(o.Out, "Diff:")
	color := isTerminal(o.Out) && os.Getenv("NO_COLOR") == ""
	for _, line := range strings.SplitAfter(printableLines(p.Redact(unifiedDiff(p.Live, p.Patched))), "\n") {
		switch {
		case line == "":
		case color && strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "+++"):
			fmt.Fprint(o.Out, "\033[32m"+strings.TrimSuffix(line, "\n")+"\033[0m\n")
		case color && strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "---"):
			fmt.Fprint(o.Out, "\033[31m"+strings.TrimSuffix(line, "\n")+"\033[0m\n")
		default:
			fmt.Fprint(o.Out, line)
		}
	}
}

// holdText says what hold mode means, in the plan.
func holdText(hold string) string {
	switch hold {
	case breakglass.HoldApp:
		return "app: the patched fields are held through every sync (ignoreDifferences with " + breakglass.RespectIgnoreDifferences + "); restore puts both back"
	case breakglass.HoldFields:
		return "fields: automated sync stays on, the patched fields are held through every sync (ignoreDifferences with " + breakglass.RespectIgnoreDifferences + "); restore puts both back"
	}
	return "sync: the pause only; a manual Sync would revert the fix"
}

// pauseShort names the pause mechanism in a few words.
func pauseShort(p *breakglass.Plan) string {
	if p.PauseMechanism == breakglass.PauseDisableAutomated {
		return "automated.enabled: false"
	}
	return "automated removed"
}

// unifiedDiff is the YAML diff of the target before and after the patch.
func unifiedDiff(live, patched map[string]any) string {
	a, _ := yaml.Marshal(live)
	b, _ := yaml.Marshal(patched)
	text, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
		FromFile: "live", ToFile: "patched", Context: 3,
	})
	return text
}

// planView is what --dry-run -o json|yaml prints: the checked plan, with
// secrets redacted as in the audit log.
type planView struct {
	Application audit.AppRef      `json:"application"`
	Cluster     string            `json:"cluster"`
	Target      audit.Target      `json:"target"`
	Actor       audit.Actor       `json:"actor"`
	Reason      string            `json:"reason"`
	Incident    string            `json:"incident,omitempty"`
	Patch       *audit.Patch      `json:"patch"`
	Changes     []audit.Change    `json:"changes"`
	SyncPolicy  *audit.SyncPolicy `json:"syncPolicy"`
	Revision    string            `json:"revision"`
	Git         audit.Git         `json:"git"`
	Parents     []string          `json:"pausesParents,omitempty"`
	Pause       string            `json:"pause,omitempty"`
	Hold        string            `json:"hold,omitempty"`
	Joins       string            `json:"joinsSession,omitempty"`
	PauseFor    string            `json:"pauseFor,omitempty"`
	AutoRestore bool              `json:"autoRestore,omitempty"`
	Ticket      *audit.Ticket     `json:"ticket,omitempty"`
	Warnings    []string          `json:"warnings,omitempty"`
}

func newPlanView(p *breakglass.Plan) planView {
	r := &audit.Record{
		Reason: p.Redact(p.Request.Reason), Incident: p.Redact(p.Request.Incident), Target: &p.Target,
		Patch:      p.RecordedPatch(),
		Changes:    p.Changes,
		SyncPolicy: &audit.SyncPolicy{Before: p.SyncPolicyBefore, After: p.SyncPolicyAfter},
	}
	audit.Redact(r)
	v := planView{
		Application: p.App, Cluster: p.Cluster, Target: p.Target, Actor: p.Actor,
		Reason: r.Reason, Incident: r.Incident, Patch: r.Patch, Changes: r.Changes, SyncPolicy: r.SyncPolicy,
		Revision: p.Git.Revision, Git: p.Git, Parents: p.Parents, Ticket: p.Ticket, Warnings: p.Warnings, Pause: p.PauseMechanism.String(),
		Hold: p.Hold,
	}
	if p.Join != nil {
		v.Joins = p.Join.ID
	}
	if p.PauseFor > 0 {
		v.PauseFor = p.PauseFor.String()
	}
	v.AutoRestore = p.AutoRestore
	return v
}
