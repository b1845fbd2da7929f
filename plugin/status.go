package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// StatusOptions holds the flags of `kubectl gitops status`.
type StatusOptions struct {
	engineFlags
	App           string
	AllNamespaces bool
	Output        string
	Watch         bool
	ExitCode      exitCode
	Wait          bool
	Timeout       time.Duration
	// RefreshTimeout bounds the wait for Argo CD's refresh; refreshSet says
	// whether the flag was given (else: 30s for one Application or --wait,
	// no wait for a listing).
	RefreshTimeout time.Duration
	refreshSet     bool
	// watched is what --watch last learnt of each session's request, and
	// when: the providers are asked once a minute, not every 3 seconds.
	watched   map[string]string
	watchedAt time.Time
	// nowhere is why no session listed means nothing: the namespace
	// holds no Application (noneSelected).
	nowhere error
	genericiooptions.IOStreams
}

var statusFormats = []string{"table", "wide", "json", "yaml"}

// NewCmdStatus returns the status command.
func NewCmdStatus(factory *Factory) *cobra.Command {
	o := &StatusOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "status [APP]",
		Short: "Show open break-glass sessions and whether Git has caught up",
		Long: `For every open break-glass session, ask Argo CD to refresh the Application and
report whether Git has caught up with the live patch:

  waiting    Git does not hold the fix yet
  diverged   Git moved but holds a different value: restoring would revert the fix
  caught-up  Git holds the fix and Argo CD reports the resource Synced

With ARGOCD_SERVER (and ARGOCD_AUTH_TOKEN) set, Git's values are also compared
path by path; that is the only proof for a patch that merely adds fields Git
never set.

Status with APP (or --wait, --watch, --exit-code) waits up to --refresh-timeout
(30s) for Argo CD's controller to refresh; --exit-code and --wait count a state
it did not refresh in time as not caught up. A listing does not wait: it
reports at once, as of each Application's last reconcile (saying so), and asks
Argo CD to refresh, so the next look is fresh. --refresh-timeout sets either.`,
		Example: `  kubectl gitops status
  kubectl gitops status web -o wide
  # In a script: exit 0 once everything is caught up
  kubectl gitops status web --wait --timeout 30m`,
		Args:              positional(0, "APP"),
		ValidArgsFunction: o.completeApplications(true),
		RunE:              run(o),
	}
	o.addAppNamespace(cmd)
	o.addEngineFlags(cmd)
	addAllNamespaces(cmd, &o.AllNamespaces, "sessions")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "refresh the view every few seconds until Ctrl-C (which exits 0)")
	o.ExitCode.register(cmd, "exit 0 when every listed session is caught up, 1 when not, 3 when it could not tell")
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "wait until every listed session is caught up (exit 1 on --timeout, 3 when it could not tell)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 10*time.Minute, "how long --wait waits")
	cmd.Flags().DurationVar(&o.RefreshTimeout, "refresh-timeout", 0, "how long to wait for Argo CD's controller to refresh before reporting as of its last reconcile; 0 does not wait (default 30s with APP, --wait, --watch or --exit-code; 0 for a listing)")
	outputFlag(cmd, &o.Output, statusFormats...)
	return cmd
}

// Complete takes APP, and whether --refresh-timeout was given.
func (o *StatusOptions) Complete(cmd *cobra.Command, args []string) error {
	o.App = arg(args, 0)
	o.refreshSet = cmd.Flags().Changed("refresh-timeout")
	return nil
}

// Validate checks the flags.
func (o *StatusOptions) Validate() error {
	if err := allNamespacesWithApp(o.App, o.AllNamespaces, "list"); err != nil {
		return err
	}
	if o.Wait && o.Watch {
		return usageErrorf("--wait and --watch cannot be combined: --wait ends when caught up, --watch runs until Ctrl-C")
	}
	if o.RefreshTimeout < 0 {
		return usageErrorf("--refresh-timeout must not be negative (0 does not wait)")
	}
	return nil
}

// defaultRefreshWait is how long status waits for Argo CD's refresh of one
// Application, or with --wait and --watch.
const defaultRefreshWait = 30 * time.Second

// refresh is how status asks for Argo CD's refresh: a listing of every
// session reports at once unless told otherwise, so that a thousand
// Applications never hold the answer behind a busy controller.
func (o *StatusOptions) refresh() breakglass.Refresh {
	wait := o.RefreshTimeout
	if !o.refreshSet {
		wait = 0
		if o.App != "" || o.Wait || o.Watch || bool(o.ExitCode) {
			wait = defaultRefreshWait
		}
	}
	return breakglass.Refresh{Request: true, Wait: wait}
}

// Run evaluates and prints the sessions.
func (o *StatusOptions) Run(ctx context.Context) (err error) {
	defer cannotTell(&err, bool(o.ExitCode) || o.Wait)
	engine, err := o.engine()
	if err != nil {
		return err
	}
	namespace := o.AppNamespace
	if o.AllNamespaces {
		namespace = ""
	}
	deadline := time.Now().Add(o.Timeout)
	// What the log says beside the sessions (reviews awaited, the
	// mirror) is read while they are evaluated, and told after them.
	var notesAside bytes.Buffer
	aside := make(chan struct{})
	go func() {
		defer close(aside)
		if !o.Watch && !o.Wait {
			o.noteAwaitingReview(ctx, engine, &notesAside)
			o.noteMirror(ctx, engine, &notesAside)
		}
	}()
	for {
		statuses, err := o.evaluate(ctx, engine, namespace)
		if o.stopped(ctx) {
			// A look cut short by Ctrl-C is not shown, nor its notes.
			return nil
		}
		if err != nil {
			return err
		}
		ready := allReady(statuses)
		switch {
		case o.Wait && !ready && len(statuses) > 0:
			if time.Now().After(deadline) {
				o.print(statuses)
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("not caught up after %s", o.Timeout)}
			}
			if isTerminal(o.ErrOut) { // progress for a person; silent for scripts
				for _, s := range statuses {
					note(o.ErrOut, "%s %s: %s", time.Now().Format("15:04:05"), s.App.Name, summary(s))
				}
			}
		case o.Watch:
			o.watchProposals(ctx, statuses)
			o.print(statuses)
			fmt.Fprintln(o.Out)
		default:
			notes := proposalStates(ctx, statuses, os.Getenv)
			if err := o.print(statuses); err != nil {
				return err
			}
			for _, n := range notes {
				note(o.ErrOut, "note: %s", n)
			}
			<-aside
			_, _ = o.ErrOut.Write(notesAside.Bytes())
			return exitCode(bool(o.ExitCode) || o.Wait).answer(!ready, o.nowhere)
		}
		select {
		case <-ctx.Done():
			if o.stopped(ctx) {
				return nil
			}
			return ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
}

// stopped is whether --watch was stopped the documented way, Ctrl-C
// (the context cancelled): that is its end, not an error.
func (o *StatusOptions) stopped(ctx context.Context) bool {
	return o.Watch && errors.Is(ctx.Err(), context.Canceled)
}

func (o *StatusOptions) evaluate(ctx context.Context, engine *breakglass.Engine, namespace string) ([]*breakglass.SessionStatus, error) {
	// Only the Applications a session or a pause marks are read whole.
	marked, err := engine.AppsMarked(ctx, namespace, breakglass.SessionAnnotation, breakglass.PausedByAnnotation)
	if err != nil {
		return nil, err
	}
	apps, err := engine.Whole(ctx, breakglass.WithSession(marked, o.App))
	if err != nil {
		return nil, err
	}
	apps = breakglass.WithSession(apps, o.App) // a session closed since the listing
	if o.App != "" && len(apps) == 0 {
		if _, err := engine.App(ctx, engine.Ref(o.App)); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("no open break-glass session on %s in namespace %s", o.App, o.AppNamespace)
	}
	if len(marked) == 0 && o.App == "" {
		some, err := engine.AnyApp(ctx, namespace)
		if err != nil {
			return nil, err
		}
		if !some && o.nowhere == nil { // told once, not at every --watch refresh
			o.nowhere = noneSelected(o.ErrOut, argocd.AppQuery{Namespace: namespace}, 0)
		}
	}
	orphans, err := engine.OrphanedPauses(ctx, marked)
	if err != nil {
		return nil, err
	}
	for _, orphan := range orphans {
		warn(o.ErrOut, orphan)
	}
	argo, err := o.argoServer()
	if err != nil {
		return nil, err
	}
	// Every refresh at once, one watch for all: never one Application
	// after another.
	return engine.CaughtUpAll(ctx, apps, argo, o.refresh())
}

// allReady is whether every session is restorable (Restorable).
func allReady(statuses []*breakglass.SessionStatus) bool {
	for _, s := range statuses {
		if !s.Restorable() {
			return false
		}
	}
	return true
}

// readyColumn is READY: yes when restorable, stale when caught up only as
// of Argo CD's last reconcile (the listing did not wait for the refresh),
// no otherwise.
func readyColumn(s *breakglass.SessionStatus) string {
	switch {
	case s.Restorable():
		return "yes"
	case s.Ready && s.Stale && s.Untrusted == "":
		return "stale"
	}
	return "no"
}

func summary(s *breakglass.SessionStatus) string {
	var parts []string
	for _, t := range s.Targets {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", t.Target, t.Git, t.Detail))
	}
	return strings.Join(parts, "; ")
}

func (o *StatusOptions) print(statuses []*breakglass.SessionStatus) error {
	if o.Output == "json" || o.Output == "yaml" {
		return printStructured(o.Out, o.Output, statuses)
	}
	if len(statuses) == 0 {
		fmt.Fprintln(o.ErrOut, "no open break-glass sessions")
		return nil
	}
	header := []string{"APP", "AGE", "BY", "TICKET", "TARGETS", "GIT", "READY", "EXPIRES", "PROPOSAL"}
	if o.Output == "wide" {
		header = append(header, "SESSION", "REVISION", "DETAIL")
	}
	t := newTable(o.Out, header...)
	for _, s := range statuses {
		var targets []string
		for _, t := range s.Targets {
			targets = append(targets, t.Target.String())
		}
		ready := readyColumn(s)
		git := string(s.Git)
		if len(s.Reverted) > 0 {
			git += ",REVERTED" // the live fix is gone: the note names the writer
		}
		row := []string{s.App.Name, age(s.Session.OpenedAt), s.Session.OpenedBy, ticketColumn(s.Session), strings.Join(targets, ","), git, ready, expiresColumn(s), proposalColumn(s.Proposal, s.ProposalState)}
		if o.Output == "wide" {
			row = append(row, s.Session.ID, argocd.ShortRevisions(s.GitAt()), strings.Join(strings.Fields(summary(s)), " "))
		}
		t.row(row...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	printNotes(o.ErrOut, statuses)
	if o.refresh().Wait == 0 {
		for _, s := range statuses {
			if s.Stale {
				note(o.ErrOut, "note: naming the Application, or --refresh-timeout, waits for Argo CD's refresh before reporting")
				break
			}
		}
	}
	return nil
}

// printNotes prints each session's notes, one line per distinct note: fifty
// sessions shown as of the last reconcile make one line, not fifty.
func printNotes(out io.Writer, statuses []*breakglass.SessionStatus) {
	var order []string
	apps := map[string][]string{}
	for _, s := range statuses {
		for _, n := range s.Notes {
			if _, seen := apps[n]; !seen {
				order = append(order, n)
			}
			apps[n] = append(apps[n], s.App.Name)
		}
	}
	for _, n := range order {
		names := strings.Join(apps[n], ", ")
		if len(apps[n]) > 3 {
			names = fmt.Sprintf("%d sessions", len(apps[n]))
		}
		note(out, "note: %s: %s", names, n)
	}
}

// proposalColumn names the session's Git proposal: "PR #12" on GitHub,
// "MR !3" on GitLab, the branch when only that was pushed, "-" for none;
// with the request's state when it is known ("PR #12 merged").
func proposalColumn(p *audit.Proposal, state string) string {
	var s string
	switch {
	case p == nil:
		return "-"
	case p.Number == 0:
		return "branch " + p.Branch
	case p.Provider == "gitlab":
		s = fmt.Sprintf("MR !%d", p.Number)
	default:
		s = fmt.Sprintf("PR #%d", p.Number)
	}
	if state != "" {
		s += " " + state
	}
	return s
}

// expiresColumn says when the session's pause expires: "in 7h", "expired"
// (with "auto-restore" when it restores by itself), "-" for never.
func expiresColumn(s *breakglass.SessionStatus) string {
	out := "-"
	switch e := s.Session.Expires; {
	case s.Expired:
		out = "expired"
	case e != nil:
		out = "in " + remaining(time.Until(*e))
	}
	if s.Session.AutoRestore {
		out += ", auto-restore"
	}
	return out
}

// remaining is a time left in minutes: 45m, 7h05m, 2d3h.
func remaining(d time.Duration) string {
	m := int(d.Round(time.Minute).Minutes())
	switch {
	case m < 1:
		return "<1m"
	case m < 60:
		return fmt.Sprintf("%dm", m)
	case m < 48*60:
		return fmt.Sprintf("%dh%02dm", m/60, m%60)
	}
	return fmt.Sprintf("%dd%dh", m/(24*60), m%(24*60)/60)
}

func age(t time.Time) string {
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// ticketColumn is the session's ticket key, marked when Jira work is still
// queued for `ticket sync`.
func ticketColumn(s *breakglass.Session) string {
	switch {
	case s.TicketPending != "" && s.Ticket != "":
		return s.Ticket + " (queued)"
	case s.TicketPending != "":
		return "queued"
	}
	return dash(s.Ticket)
}

// noteAwaitingReview says, on stderr, how many closed sessions no approval
// stands for yet (never reviewed, or rejected) and which is the oldest;
// nothing when none, or when the log cannot be read (the listing above is
// what status is for).
func (o *StatusOptions) noteAwaitingReview(ctx context.Context, engine *breakglass.Engine, w io.Writer) {
	// Only people who can review hear of the backlog: to on-call it was
	// a line on every status they could do nothing about.
	if actor, err := engine.Whoami(ctx); err != nil || !slices.Contains(actor.Groups, audit.ReviewerGroup) {
		return
	}
	waiting, err := engine.AwaitingReview(ctx)
	if err != nil || len(waiting) == 0 {
		return
	}
	oldest := waiting[0]
	note(w, "%d closed session(s) await review (never reviewed, or rejected); the oldest is %s on %s, %s at %s: %s",
		len(waiting), oldest.Session, appName(oldest), strings.TrimPrefix(string(oldest.Event), "breakglass."), oldest.Time.UTC().Format(time.RFC3339), next.AuditLogUnreviewed())
}

// mirrorStale is how old a published mirror state may be before status
// says the controller may not be running: it publishes at least every
// 30 seconds while it leads.
const mirrorStale = 2 * time.Minute

// noteMirror tells where the audit log's mirror stands, as the
// controller's leader last published it (controller --mirror), and how
// long ago: nothing when no controller ever published one.
func (o *StatusOptions) noteMirror(ctx context.Context, engine *breakglass.Engine, w io.Writer) {
	log, ok := engine.Audit.(*audit.ConfigMapStore)
	if !ok {
		return
	}
	st, err := log.MirrorState(ctx)
	switch {
	case err != nil:
		note(w, "mirror: %v", err)
		return
	case st == nil:
		return
	}
	note(w, "%s", describeMirror(st, time.Now()))
}

// describeMirror says st in one line, as of now.
func describeMirror(st *audit.MirrorState, now time.Time) string {
	var parts []string
	if st.Backlog == 0 {
		parts = append(parts, fmt.Sprintf("caught up at record %d", st.Newest))
	} else {
		waiting := fmt.Sprintf("%d record(s) not yet mirrored after record %d", st.Backlog, st.Newest)
		if st.OldestUnmirrored != nil {
			waiting += ", the oldest waiting " + age(*st.OldestUnmirrored)
		}
		parts = append(parts, waiting)
	}
	if !st.WriteOnce {
		parts = append(parts, "NOT write-once (accepted without versioning and Object Lock)")
	}
	if st.PrunedThrough > 0 {
		parts = append(parts, fmt.Sprintf("records up to %d pruned from the cluster, kept in the mirror", st.PrunedThrough))
	}
	when := fmt.Sprintf("published by %s %s ago", printable(st.Leader), age(st.Published))
	if now.Sub(st.Published) > mirrorStale {
		when = fmt.Sprintf("as %s last published it %s ago: no controller has published since, is one running?", printable(st.Leader), age(st.Published))
	}
	return fmt.Sprintf("mirror %s: %s (%s)", printable(st.Mirror), strings.Join(parts, "; "), when)
}
