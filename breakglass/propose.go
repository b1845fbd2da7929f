package breakglass

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/proposal"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// ErrCannotPropose is a session whose fix cannot be proposed in Git
// without guessing: the change must be made by hand, and the error says
// why.
var ErrCannotPropose = proposal.ErrCannotPropose

// ProposeRequest is what `kubectl gitops propose` asks for.
type ProposeRequest struct {
	App string
	// Namespace is App's; "" is the engine's AppNamespace.
	Namespace string
	// Auth, when set, reaches Git in process with it (the controller,
	// which has no git binary); nil runs git with the user's credentials.
	Auth *proposal.Auth
	// ProviderFor is the provider that opens the pull or merge request for
	// a repository (nil: push the branch only); nil pushes only.
	ProviderFor func(repoURL string) (proposal.Provider, error)
	// DryRun computes and verifies the change and pushes nothing.
	DryRun bool
}

// Proposed is a session's fix proposed in Git.
type Proposed struct {
	App     audit.AppRef `json:"application"`
	Session string       `json:"session"`
	// Source is how Argo CD renders the source: Directory, Kustomize or
	// Helm.
	Source string `json:"source"`
	// Proposal is what was pushed and opened (on a dry run, what would be).
	Proposal audit.Proposal `json:"proposal"`
	// State is the pull or merge request's state: open, merged, closed.
	State string `json:"state,omitempty"`
	// Changes are the fields written, values redacted as records are.
	Changes []ProposedChange `json:"changes"`
	// Diff is the edited files, before and after, as a unified-style diff
	// of the changed lines.
	Diff     string   `json:"diff"`
	DryRun   bool     `json:"dryRun,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// ProposedChange is one field the proposal writes.
type ProposedChange struct {
	Target audit.Target `json:"target"`
	Path   string       `json:"path"`
	Value  any          `json:"value"`
	File   string       `json:"file"`
}

// ProposalBranch is the branch a session's proposal is pushed to.
func ProposalBranch(session string) string { return "kubectl-gitops/" + session }

// Propose writes the Git change that makes the Application's source
// render the session's live fix: it reads the live value of every path
// the session patched (each checked against the digest the audit log
// keeps, so only the session's own fix goes into Git), edits the files of
// the pinned source that define the targets, verifies the edited source
// renders those values and nothing else changed, pushes a branch with the
// user's own Git credentials, opens a pull or merge request, records
// breakglass.proposed and links it from the ticket.
func (e *Engine) Propose(ctx context.Context, req ProposeRequest) (*Proposed, error) {
	p, err := e.startProposing(ctx, req)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubectl-gitops-propose-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := p.makeChange(ctx, dir); err != nil {
		return nil, err
	}
	if req.DryRun {
		return p.out, nil
	}
	return p.publish(ctx)
}

// proposing is one run of Propose: what it read, then what it made.
type proposing struct {
	*Engine
	req      ProposeRequest
	actor    audit.Actor
	app      argocd.App
	st       *SessionStatus
	sources  []proposal.Source
	src      proposal.Source
	kind     string
	provider proposal.Provider
	edits    []proposal.Edit
	repo     *proposal.Repo
	change   *proposal.Change
	out      *Proposed
	// tag names what is proposed (the session, or a drift's time): the
	// files a kustomize patch adds are named after it.
	tag string
}

// startProposing reads who asks, the session's status (refusing a fix
// that is not the session's to propose), the source and the live values.
func (e *Engine) startProposing(ctx context.Context, req ProposeRequest) (*proposing, error) {
	p := &proposing{Engine: e, req: req}
	var err error
	if p.actor, err = e.Whoami(ctx); err != nil {
		return nil, err
	}
	ref := e.Ref(req.App)
	if req.Namespace != "" {
		ref.Namespace = req.Namespace
	}
	if p.app, err = e.withSession(ctx, ref, "there is no live fix to propose"); err != nil {
		return nil, err
	}
	if p.st, err = e.CaughtUp(ctx, p.app, nil, false); err != nil {
		return nil, err
	}
	if err := proposable(p.st); err != nil {
		return nil, err
	}
	p.tag = p.st.Session.ID
	if err := p.readSources(); err != nil {
		return nil, err
	}
	if p.edits, err = e.liveEdits(ctx, p.app, p.st.Session); err != nil {
		return nil, err
	}
	return p, nil
}

// readSources reads the Application's sources: one is refused, or its
// provider found, before any work.
func (p *proposing) readSources() error {
	switch p.sources = p.app.SourceSpecs(); len(p.sources) {
	case 0:
		return fmt.Errorf("%w: the Application has no source", ErrCannotPropose)
	case 1:
		p.src = p.sources[0]
		if why := proposal.Refusal(p.src); why != "" {
			return fmt.Errorf("%w: %s", ErrCannotPropose, why)
		}
		return p.resolveProvider()
	}
	return nil
}

// resolveProvider finds where the chosen source's request is opened.
func (p *proposing) resolveProvider() error {
	if p.req.ProviderFor == nil || p.req.DryRun {
		return nil
	}
	var err error
	p.provider, err = p.req.ProviderFor(p.src.RepoURL)
	return err
}

// changeIn checks source s out under dir and makes the change there.
func (p *proposing) changeIn(ctx context.Context, s proposal.Source, dir string) (*proposal.Repo, string, *proposal.Change, error) {
	repo, err := proposal.CloneWith(ctx, s, dir, p.actor.Username, p.req.Auth)
	if err != nil {
		return nil, "", nil, fmt.Errorf("checking out %s: %w", redact.Text(s.RepoURL), err)
	}
	kind := proposal.KindOf(s, repo.Dir)
	if p.req.Auth != nil && kind == proposal.KindKustomize {
		// The controller renders nothing that reaches past the checkout.
		if err := proposal.LocalKustomization(repo.Dir, s.Path); err != nil {
			return nil, "", nil, err
		}
	}
	change, err := proposal.Make(ctx, repo.Dir, kind, s, proposal.App{Name: p.app.GetName(), Namespace: p.app.Destination().Namespace}, p.edits, p.tag)
	return repo, kind, change, err
}

// chooseSource makes the change in the one source, of several, that
// renders the patched objects: each source is checked out and edited, and
// exactly one must take the whole fix. The others say why not.
func (p *proposing) chooseSource(ctx context.Context, dir string) error {
	var took []int
	var why []string
	var failed []error // of sources that render the objects, but cannot take the fix
	for i, s := range p.sources {
		name := fmt.Sprintf("source %d (%s %s)", s.Position, redact.Text(s.RepoURL), s.Path+s.Chart)
		if refusal := proposal.Refusal(s); refusal != "" {
			why = append(why, name+": "+refusal)
			continue
		}
		repo, kind, change, err := p.changeIn(ctx, s, fmt.Sprintf("%s/repo-%d", dir, s.Position))
		var elsewhere *proposal.NotRendered
		switch {
		case errors.As(err, &elsewhere):
			why = append(why, name+": "+elsewhere.Why)
		case err != nil:
			why = append(why, name+": "+err.Error())
			failed = append(failed, fmt.Errorf("%s: %w", name, err))
		default:
			took = append(took, i)
			p.src, p.repo, p.kind, p.change = s, repo, kind, change
		}
	}
	switch {
	case len(took) == 1 && len(failed) > 0:
		// The source that failed may render the objects too, and
		// override the fix: nothing is proven.
		return fmt.Errorf("%w: %v; another source takes the fix, but this one could not be checked", ErrCannotPropose, errors.Join(failed...))
	case len(took) == 1 && lentTo(p.sources, p.src) != "":
		return fmt.Errorf("%w: source %d takes the fix, but %s reads its files as $%s, and what that renders is not checked: make the change by hand", ErrCannotPropose, p.src.Position, lentTo(p.sources, p.src), p.src.Ref)
	case len(took) == 1:
		return p.resolveProvider()
	case len(took) > 1:
		return fmt.Errorf("%w: sources %d and %d both render the patched objects: make the change by hand in the one Argo CD applies", ErrCannotPropose, p.sources[took[0]].Position, p.sources[took[1]].Position)
	case len(failed) == 1:
		return failed[0]
	}
	return fmt.Errorf("%w: no source of the Application takes the fix: %s", ErrCannotPropose, strings.Join(why, "; "))
}

// lentTo names a source of sources that reads s's files as a value file
// ($REF/…), "" when none does.
func lentTo(sources []proposal.Source, s proposal.Source) string {
	if s.Ref == "" {
		return ""
	}
	for _, other := range sources {
		for _, f := range other.Helm.ValueFiles {
			if strings.HasPrefix(f, "$"+s.Ref+"/") {
				return fmt.Sprintf("source %d", other.Position)
			}
		}
	}
	return ""
}

// makeChange checks the source out under dir (each source, when there are
// several, to find the one that renders the fix), edits it, verifies the
// edit renders the live fix and nothing else, and says what it would push.
func (p *proposing) makeChange(ctx context.Context, dir string) error {
	if err := p.edit(ctx, dir); err != nil {
		return err
	}
	if err := holdsFix(p.change.After, p.app.Destination().Namespace, p.st.Session); err != nil {
		return err
	}
	return p.describe(ctx, ProposalBranch(p.st.Session.ID), p.st.Session.ID)
}

// edit makes the change in the source that takes it, checked out under
// dir; a source that holds the values already leaves nothing to do.
func (p *proposing) edit(ctx context.Context, dir string) error {
	var err error
	if len(p.sources) > 1 {
		err = p.chooseSource(ctx, dir)
	} else {
		p.repo, p.kind, p.change, err = p.changeIn(ctx, p.src, dir+"/repo")
	}
	if err != nil {
		return err
	}
	if len(p.change.Files) == 0 {
		return fmt.Errorf("%w: %s of %s already holds the live values: nothing to propose; `%s` says whether Argo CD has caught up", ErrNothingToDo, p.repo.Base, redact.Text(p.src.RepoURL), next.Status(p.app.GetNamespace(), p.req.App))
	}
	return nil
}

// describe says what the change pushes to branch, and refuses a branch
// that is there already (a proposal of session, "" for none, before).
func (p *proposing) describe(ctx context.Context, branch, session string) error {
	out := &Proposed{App: p.app.Record(), Session: session, Source: p.kind, DryRun: p.req.DryRun, Diff: diff(p.change.Old, p.change.Files)}
	out.Proposal = audit.Proposal{RepoURL: redact.Text(p.src.RepoURL), Base: p.repo.Base, Branch: branch, Provider: "none"}
	for _, f := range p.change.Files {
		out.Proposal.Files = append(out.Proposal.Files, f.Path)
	}
	for i, ed := range p.edits {
		out.Changes = append(out.Changes, ProposedChange{Target: ed.Target, Path: ed.Path, Value: redact.At(ed.Target.GroupKind(), ed.Path, ed.Value), File: p.change.Placed[i]})
	}
	if p.provider != nil {
		out.Proposal.Provider = p.provider.Name()
	}
	p.out = out
	exists, err := p.repo.BranchExists(ctx, branch)
	switch {
	case err != nil:
		return err
	case exists && session != "":
		return fmt.Errorf("%w: branch %s already exists in %s: session %s was proposed before (`%s` names it); merge or delete that branch", argocd.ErrConflict, branch, out.Proposal.RepoURL, session, next.AuditLog(p.req.App, string(audit.EventProposed), false))
	case exists:
		return fmt.Errorf("%w: branch %s already exists in %s: merge or delete it", argocd.ErrConflict, branch, out.Proposal.RepoURL)
	}
	return nil
}

// push commits the change on the proposal's branch, pushes it with the
// user's own credentials and opens the request, when there is a provider.
// openErr is the provider's refusal once the branch is pushed.
func (p *proposing) push(ctx context.Context, message, body string) (openErr, err error) {
	out, branch := p.out, p.out.Proposal.Branch
	if out.Proposal.Commit, err = p.repo.Commit(ctx, branch, message, p.change.Files); err != nil {
		return nil, fmt.Errorf("committing the proposal: %w", err)
	}
	if err := p.repo.Push(ctx, branch); err != nil {
		whose := "with your own Git credentials"
		if p.req.Auth != nil {
			whose = "with the controller's Git token"
		}
		return nil, fmt.Errorf("pushing %s (%s): %w", branch, whose, err)
	}
	if p.provider != nil {
		var opened *proposal.Opened
		if opened, openErr = p.provider.Open(ctx, proposal.Request{Branch: branch, Base: p.repo.Base, Title: firstLine(message), Body: body}); openErr == nil {
			out.Proposal.Number, out.Proposal.URL, out.State = opened.Number, opened.URL, opened.State
		}
	}
	return openErr, nil
}

// publish commits and pushes the branch with the user's own credentials,
// opens the pull or merge request, records breakglass.proposed and links
// it from the ticket. A started record, naming the branch, goes ahead of
// the push: a run killed or refused by the log after it leaves no branch
// the log does not name. What it returns is nil until the branch is
// pushed.
func (p *proposing) publish(ctx context.Context) (*Proposed, error) {
	st, out, branch := p.st, p.out, p.out.Proposal.Branch
	subj := subject{actor: p.actor, app: st.App, cluster: p.app.Destination().Server, git: st.GitAt(), reason: st.Session.Reason, incident: st.Session.Incident}
	if len(st.Targets) > 0 {
		subj.target = st.Targets[0].Target
	}
	proposedAs := func(r *audit.Record) {
		proposed := out.Proposal
		r.Proposal = &proposed
	}
	started, err := p.record(ctx, subj, st.Session.ID, audit.EventProposed, audit.Outcome{Status: audit.StatusStarted}, proposedAs)
	if err != nil {
		return nil, err
	}
	openErr, err := p.push(ctx, commitMessage(st, out), requestBody(st, out))
	// The started record gets its outcome even when ctx ended during the
	// push (the controller's deadline, Ctrl-C).
	outcomeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err != nil {
		// It names no proposal: nothing counts.
		if _, rerr := p.record(outcomeCtx, subj, st.Session.ID, audit.EventProposed, audit.Outcome{Status: audit.StatusFailed, Error: err.Error()}, nil); rerr != nil {
			return nil, fmt.Errorf("%w; and record %d (started) was left without its outcome: %v", err, started.Seq, rerr)
		}
		return nil, err
	}
	outcome := audit.Outcome{Status: audit.StatusSucceeded}
	if openErr != nil {
		outcome = audit.Outcome{Status: audit.StatusFailed, Error: "the branch is pushed; opening the request failed: " + openErr.Error()}
	}
	recorded, err := p.record(outcomeCtx, subj, st.Session.ID, audit.EventProposed, outcome, proposedAs)
	if err != nil {
		return out, fmt.Errorf("branch %s is pushed, and record %d names it, but its outcome could not be recorded: %w", branch, started.Seq, err)
	}
	if openErr != nil {
		return out, fmt.Errorf("branch %s is pushed, but opening the %s request failed: %w", branch, out.Proposal.Provider, openErr)
	}
	if w := p.ticketProposal(ctx, st.Session, out, recorded); w != "" {
		out.Warnings = append(out.Warnings, w)
	}
	return out, nil
}

// proposable refuses a session whose fix is not the session's to propose
// as it stands: one the log does not trust, a repointed Application, a fix
// reverted live, a patch still being sent.
func proposable(st *SessionStatus) error {
	switch {
	case st.Untrusted != "":
		return fmt.Errorf("%w on %s: %s; nothing was proposed", ErrSessionMismatch, st.App.Name, st.Untrusted)
	case len(st.Retargeted) > 0:
		return fmt.Errorf("%w: %s; the session's fix is judged against the sources it was opened on: nothing was proposed", ErrRetargeted, strings.Join(st.Retargeted, "; "))
	case len(st.Reverted) > 0:
		return fmt.Errorf("%w: the live fix no longer holds at %s, so the live values are not the session's: nothing was proposed", ErrCannotPropose, describeReverted(st.Reverted))
	case st.Session.pending() != nil || len(st.InFlight) > 0:
		return fmt.Errorf("%w: a break-glass run of session %s has not recorded its patch yet: propose once it has", ErrRunInFlight, st.Session.ID)
	case len(st.Session.donePatches()) == 0:
		return fmt.Errorf("%w: session %s has patched nothing yet", ErrNothingToDo, st.Session.ID)
	}
	return nil
}

// liveEdits are the session's patched paths with their live values, each
// checked against the digest the audit log keeps of the patched value.
func (e *Engine) liveEdits(ctx context.Context, app argocd.App, s *Session) ([]proposal.Edit, error) {
	cluster, err := e.ClusterOf(app, "")
	if err != nil {
		return nil, err
	}
	var edits []proposal.Edit
	for _, p := range latestPatches(s) {
		live, err := cluster.Object(ctx, p.Target)
		if err != nil {
			return nil, fmt.Errorf("reading the live %s: %w", p.Target, err)
		}
		for _, f := range p.Fields {
			if f.Secret || f.After == "" {
				return nil, fmt.Errorf("%w: %s %s holds a value the session does not record (a secret, or free text): it would go into Git in the clear and cannot be checked against the log; make that change by hand", ErrCannotPropose, p.Target, f.Path)
			}
			v, found := audit.Lookup(live.Object, f.Path)
			if digest(v) != f.After {
				return nil, fmt.Errorf("%w: the live %s %s no longer holds the session's value: nothing was proposed", ErrCannotPropose, p.Target, f.Path)
			}
			edits = append(edits, proposal.Edit{Target: p.Target, Path: f.Path, Value: v, Delete: !found})
		}
	}
	return edits, nil
}

// holdsFix checks what the edited source renders by the session's own
// digests: every patched path of every target holds the patched value.
func holdsFix(docs []proposal.Document, dest string, s *Session) error {
	for _, p := range latestPatches(s) {
		var obj map[string]any
		for _, d := range docs {
			if d.Matches(p.Target, dest) {
				obj = d.Object
			}
		}
		for _, f := range p.Fields {
			if v, _ := audit.Lookup(obj, f.Path); digest(v) != f.After {
				return fmt.Errorf("%w: the edited source does not render the live value at %s %s", ErrCannotPropose, p.Target, f.Path)
			}
		}
	}
	return nil
}

// diff is the changed lines of each edited file (before[i] what edited[i]
// held before, no data for a new file), old before new.
func diff(before, edited []proposal.File) string {
	var b strings.Builder
	for i, ed := range edited {
		var old []string
		from := "a/" + ed.Path
		if before[i].Data == nil {
			from = "/dev/null"
		} else {
			old = strings.Split(string(before[i].Data), "\n")
		}
		now := strings.Split(string(ed.Data), "\n")
		fmt.Fprintf(&b, "--- %s\n+++ b/%s\n", from, ed.Path)
		// The edits keep every other line: strip the common head and tail.
		head := 0
		for head < len(old) && head < len(now) && old[head] == now[head] {
			head++
		}
		tail := 0
		for tail < len(old)-head && tail < len(now)-head && old[len(old)-1-tail] == now[len(now)-1-tail] {
			tail++
		}
		fmt.Fprintf(&b, "@@ -%d +%d @@\n", head+1, head+1)
		for _, l := range old[head : len(old)-tail] {
			b.WriteString("-" + l + "\n")
		}
		for _, l := range now[head : len(now)-tail] {
			b.WriteString("+" + l + "\n")
		}
	}
	return b.String()
}

func commitMessage(st *SessionStatus, p *Proposed) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: bring Git up to break-glass session %s\n\n", st.App.Name, st.Session.ID)
	fmt.Fprintf(&b, "The live fix of break-glass session %s (opened by %s: %s) is written here, so that\nArgo CD renders it and sync can be restored without reverting it.\n\n", st.Session.ID, st.Session.OpenedBy, st.Session.Reason)
	writeChanges(&b, p.Changes)
	return b.String()
}

// writeChanges lists the fields a commit writes, a line each.
func writeChanges(b *strings.Builder, changes []ProposedChange) {
	for _, c := range changes {
		fmt.Fprintf(b, "- %s %s = %s (%s)\n", c.Target, c.Path, jsonText(c.Value), c.File)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// requestBody is the pull or merge request's description: the session,
// its reason, incident and ticket, what changed (redacted as records
// are), and the checks made before pushing.
func requestBody(st *SessionStatus, p *Proposed) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Break-glass session `%s` on Argo CD application `%s/%s` patched the live cluster. This change writes the live fix into Git so that sync can be restored without reverting it.\n\n", st.Session.ID, st.App.Namespace, st.App.Name)
	fmt.Fprintf(&b, "- opened by: %s at %s\n- reason: %s\n", st.Session.OpenedBy, st.Session.OpenedAt.UTC().Format(time.RFC3339), st.Session.Reason)
	if st.Session.Incident != "" {
		fmt.Fprintf(&b, "- incident: %s\n", st.Session.Incident)
	}
	if st.Session.Ticket != "" {
		fmt.Fprintf(&b, "- ticket: %s\n", st.Session.Ticket)
	}
	b.WriteString("\n### What changes\n\n| object | field | value | file |\n| --- | --- | --- | --- |\n")
	for _, c := range p.Changes {
		fmt.Fprintf(&b, "| %s | `%s` | `%s` | %s |\n", c.Target, c.Path, jsonText(c.Value), c.File)
	}
	b.WriteString("\n### Checked before pushing\n\n")
	b.WriteString("- every value is the live one, matched against the digest the session's audit record keeps\n")
	fmt.Fprintf(&b, "- the edited source, rendered as Argo CD renders a %s source, yields those values at those paths, and every other object and field exactly as before\n", p.Source)
	b.WriteString("- comments, key order and formatting of the edited files are kept: only the values change\n\n")
	fmt.Fprintf(&b, "Once this is merged and Argo CD reports the application caught up, `%s` (or the controller, for an auto-restore session) turns sync back on.\n", next.Restore(st.App.Namespace, st.App.Name))
	return b.String()
}

// ticketProposal links the pull request from the session's ticket and
// comments there; it returns a warning when Jira could not be told.
func (e *Engine) ticketProposal(ctx context.Context, s *Session, p *Proposed, rec *audit.Record) string {
	if s.Ticket == "" || e.tickets().Ready() != nil || p.Proposal.URL == "" {
		return ""
	}
	kind := "Pull request"
	if p.Proposal.Provider == "gitlab" {
		kind = "Merge request"
	}
	title := fmt.Sprintf("%s #%d: %s", kind, p.Proposal.Number, p.Proposal.Branch)
	var errs []error
	if err := e.tickets().LinkTo(ctx, s.Ticket, p.Proposal.URL, title); err != nil {
		errs = append(errs, err)
	}
	if err := e.tickets().Comment(ctx, s.Ticket, ticket.ProposalComment(rec.Actor.Username, p.Proposal, witness(rec))); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Sprintf("the proposal is recorded, but ticket %s could not be told of it: %v", s.Ticket, err)
	}
	return ""
}
