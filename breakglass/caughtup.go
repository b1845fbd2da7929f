package breakglass

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// GitState says whether Git has caught up with a session's live patch.
type GitState string

// The states of docs/design.md §5.
const (
	GitWaiting  GitState = "waiting"
	GitDiverged GitState = "diverged"
	GitCaughtUp GitState = "caught-up"
)

// TargetState is the catch-up state of one patched resource.
type TargetState struct {
	Target audit.Target `json:"target"`
	// Resource is Argo CD's sync status of the resource after a refresh.
	Resource string   `json:"resource"`
	Git      GitState `json:"git"`
	Detail   string   `json:"detail"`
}

// ProposalPush is a run that started pushing a session's proposal: when,
// as its record says, and who (stamped by the API server).
type ProposalPush struct {
	At time.Time
	By string
}

// SessionStatus is the catch-up state of one open session.
type SessionStatus struct {
	App     audit.AppRef `json:"application"`
	Session *Session     `json:"session"`
	// Revision is where Git stands now, as audit.Git has it: Revisions
	// holds each source's for several sources, Hydrated the rendered
	// commit for the source hydrator (Revision is then the dry commit).
	Revision  string        `json:"revision"`
	Revisions []string      `json:"revisions,omitempty"`
	Hydrated  string        `json:"hydrated,omitempty"`
	Git       GitState      `json:"git"`
	Ready     bool          `json:"ready"`
	Targets   []TargetState `json:"targets"`
	// FieldLevel is whether Git's values were compared path by path
	// through the Argo CD API server.
	FieldLevel bool `json:"fieldLevel"`
	// CannotTell says why, where this status was made, Git catching up
	// can never be told: the session holds its fields out of Argo CD's
	// compare and no Argo CD API is configured for the field-level check.
	// Only a forced restore, or a reader with the API, closes it.
	CannotTell string `json:"cannotTell,omitempty"`
	// Stale says the state is as of Argo CD's last reconcile: the refresh
	// was not awaited, or the controller did not get to it in time.
	Stale bool `json:"stale,omitempty"`
	// Expired is whether the session's pause has expired (its expiry is
	// Session.Expires, as the planned record has it): sync stays off until
	// Git has caught up and someone, or the controller, restores.
	Expired bool `json:"expired,omitempty"`
	// SyncReenabled is whether automated sync is on again while the
	// session is open (Argo CD's toggle-auto-sync action, argocd app set,
	// an edit by anyone the admission policy does not hold): Argo CD may
	// have reverted the fix. It is never ready: restore needs --force.
	SyncReenabled bool `json:"syncReenabled,omitempty"`
	// Untrusted says why the session the annotation names is not the one
	// the verified audit log has open on the Application (it names
	// another session, or one the log closed): never ready, restore
	// refuses, and --force restores the log's open session when there is
	// one. "" when the annotation names the log's open session.
	Untrusted string `json:"untrusted,omitempty"`
	// Mismatch names each field of the session annotation the verified
	// audit log contradicts (anyone in the break-glass group may edit the
	// annotation). The session evaluated is the log's, so a mismatch
	// holds nothing back: it is named, recorded with the restore, and
	// mended by the next --join.
	Mismatch []string `json:"mismatch,omitempty"`
	// InFlight are the session's break-glass runs that have not recorded
	// how their patch ended, as the audit log has them: still running, or
	// interrupted (Gone says why), which status, restore and the
	// controller resolve from the live target.
	InFlight []InFlight `json:"inFlight,omitempty"`
	// Retargeted names how the Application's sources, destination or
	// project changed since the session was opened against them (the
	// planned record pins them): caught-up is judged only against the
	// pinned sources, so the session is never ready then; restore needs
	// --force.
	Retargeted []string `json:"retargeted,omitempty"`
	// Reverted are the patched paths whose live value is no longer the
	// session's (a manual Sync, an apply of Git's manifest, an operator),
	// each with the field manager that wrote it: the fix is gone there.
	Reverted []Reverted `json:"reverted,omitempty"`
	// Proposal is the newest Git change proposed for the session's fix
	// (breakglass.proposed), as the audit log has it; nil when none.
	Proposal *audit.Proposal `json:"proposal,omitempty"`
	// ProposalPushes are the runs that started pushing a proposal of the
	// fix (started breakglass.proposed records), oldest first: how often
	// the controller tried, however often it restarted.
	ProposalPushes []ProposalPush `json:"-"`
	// ProposalState is the state of its pull or merge request as the
	// provider answered the caller (open, merged, closed); "" when not
	// asked or not known. The engine never asks: it is the reader's.
	ProposalState string `json:"proposalState,omitempty"`
	// annotated is the session as the annotation had it, which restore's
	// write is conditional on.
	annotated *Session
	// trusted is whether the audit log has a session to act on.
	trusted bool
	// banner is the notice the session's records make, when the
	// Application shows another (BannerForged): what puts it back.
	banner map[string]any
	Notes  []string `json:"notes,omitempty"`
	// Warnings are what restore could not finish, such as closing the
	// ticket (then queued for `ticket sync`).
	Warnings []string `json:"warnings,omitempty"`
}

// WithSession keeps the Applications of apps that carry a session, only the
// one named app when app is set.
func WithSession(apps []argocd.App, app string) []argocd.App {
	var out []argocd.App
	for _, a := range apps {
		if _, ok := a.GetAnnotations()[SessionAnnotation]; ok && (app == "" || a.GetName() == app) {
			out = append(out, a)
		}
	}
	return out
}

// Refresh says whether status asks Argo CD's controller to refresh the
// Applications first, and how long it waits for the controller to do so.
type Refresh struct {
	Request bool
	// Wait bounds the wait for the controller; 0 requests the refresh
	// without waiting: the state is then as of the last reconcile, and the
	// next look sees the refresh.
	Wait time.Duration
}

// CaughtUp requests a refresh of app (when refresh is set and allowed), waits
// for the controller, and evaluates docs/design.md §5 for every patched resource.
// argo may be nil: then only resource-level rules apply.
func (e *Engine) CaughtUp(ctx context.Context, app argocd.App, argo *argocd.Server, refresh bool) (*SessionStatus, error) {
	all, err := e.CaughtUpAll(ctx, []argocd.App{app}, argo, Refresh{Request: refresh, Wait: e.ControllerTimeout()})
	if err != nil {
		return nil, err
	}
	return all[0], nil
}

// CaughtUpAll evaluates many sessions together: every refresh is requested
// at once, one watch waits for the controller to reach all of them, within
// refresh.Wait; an Application it did not reach in time is reported as of
// its last reconcile, saying so. Nothing waits per Application.
func (e *Engine) CaughtUpAll(ctx context.Context, apps []argocd.App, argo *argocd.Server, refresh Refresh) ([]*SessionStatus, error) {
	notes, stale := make([][]string, len(apps)), make([]bool, len(apps))
	// Refreshes not waited for are requested while the sessions are
	// judged as of the last reconcile: nothing here reads their answer.
	var refreshed *pending[refreshNotes]
	switch {
	case refresh.Request && refresh.Wait == 0:
		asked := append([]argocd.App(nil), apps...)
		refreshed = start(func() (refreshNotes, error) {
			n, s := e.refreshAll(ctx, asked, 0)
			return refreshNotes{n, s}, nil
		})
	case refresh.Request:
		notes, stale = e.refreshAll(ctx, apps, refresh.Wait)
	}
	// Each session is judged by its records and its Application's: read
	// for all of them at once, not two listings a session.
	var ids, names []string
	for _, app := range apps {
		if session, err := SessionOf(app); err == nil {
			ids, names = append(ids, session.ID), append(names, app.GetName())
		}
	}
	log, err := audit.Prefetch(ctx, e.Audit, ids, names)
	if err != nil {
		return nil, fmt.Errorf("reading the audit records of %d sessions: %w", len(ids), err)
	}
	read := logReader{log}
	out := make([]*SessionStatus, len(apps))
	errs := make([]error, len(apps))
	argocd.Parallel(len(apps), func(i int) {
		if out[i], errs[i] = e.evaluate(ctx, read, apps[i], argo, nil); errs[i] != nil {
			return
		}
		// A run interrupted before it recorded its patch is resolved
		// now, by whoever looks, and the session evaluated again.
		if refresh.Request && out[i].Interrupted() {
			app, resolved, err := e.Resolve(ctx, apps[i], out[i], false)
			if err != nil {
				out[i].Notes = append(out[i].Notes, "could not resolve the interrupted run: "+argocd.Brief(err))
			} else if out[i], errs[i] = e.evaluate(ctx, e.log(), app, argo, resolved); errs[i] != nil {
				return
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if refreshed != nil {
		r, _ := refreshed.wait()
		notes, stale = r.notes, r.stale
	}
	for i, st := range out {
		// What the state is as of comes first, as when it was awaited.
		st.Notes, st.Stale = append(append([]string(nil), notes[i]...), st.Notes...), stale[i]
	}
	return out, nil
}

// refreshNotes is what refreshAll says of each Application.
type refreshNotes struct {
	notes [][]string
	stale []bool
}

// refreshAll requests a refresh of every Application at once and waits,
// within wait (0: not at all), for one watch to see the controller reach
// them, replacing each in apps with the newest seen. It returns, per
// Application, notes on what the state is as of, and whether it is stale.
func (e *Engine) refreshAll(ctx context.Context, apps []argocd.App, wait time.Duration) ([][]string, []bool) {
	notes, stale := make([][]string, len(apps)), make([]bool, len(apps))
	requested := make([]bool, len(apps))
	// since is when the API server took each request: a reconcile
	// stamped before it is no answer to it.
	since := make([]time.Time, len(apps))
	argocd.Parallel(len(apps), func(i int) {
		app := apps[i]
		session, err := SessionOf(app)
		if err != nil {
			return
		}
		// With the source hydrator, as Argo CD's own refresh does: look
		// for a new dry commit now, not when the revision cache expires.
		patch := map[string]any{"metadata": map[string]any{"annotations": argocd.RefreshRequest(map[string]any{}, app.Hydrated())}}
		written, err := e.Write(ctx, app, argocd.Write{Check: ownSession(app.GetName(), session.ID), Patch: func(argocd.App) map[string]any { return patch }})
		if err != nil {
			notes[i] = append(notes[i], "could not request a refresh ("+argocd.Brief(err)+"): the state is as of Argo CD's last reconcile")
			return
		}
		requested[i], since[i] = true, argocd.WrittenAt(written.Unstructured)
	})
	fresh := map[string]argocd.App{}
	if wait > 0 {
		fresh = e.waitAllRefreshed(ctx, apps, requested, since, wait)
	}
	for i, app := range apps {
		f, seen := fresh[app.GetNamespace()+"/"+app.GetName()]
		if seen {
			apps[i] = f
		}
		if !requested[i] {
			continue
		}
		switch _, pending := apps[i].GetAnnotations()[argocd.RefreshAnnotation]; {
		case wait == 0:
			notes[i] = append(notes[i], "as of Argo CD's last reconcile"+apps[i].ReconciledAt()+"; a refresh was requested, not awaited")
			stale[i] = true
		case !seen:
			notes[i] = append(notes[i], "could not watch for Argo CD's refresh: the state is as of its last reconcile"+apps[i].ReconciledAt())
			stale[i] = true
		case pending:
			notes[i] = append(notes[i], "Argo CD's controller did not refresh in time: the state is as of its last reconcile"+apps[i].ReconciledAt())
			stale[i] = true
		case !apps[i].RefreshedSince(since[i]):
			notes[i] = append(notes[i], "the refresh request was removed before Argo CD's controller answered it (its status.reconciledAt is older than the request): the state is as of its last reconcile"+apps[i].ReconciledAt())
			stale[i] = true
		}
	}
	return notes, stale
}

// waitAllRefreshed waits, at most the controller wait, until the controller
// has refreshed every requested Application since its request, and
// returns the newest version of each it saw.
func (e *Engine) waitAllRefreshed(ctx context.Context, apps []argocd.App, requested []bool, since []time.Time, wait time.Duration) map[string]argocd.App {
	var keys []string
	requestedAt := map[string]time.Time{}
	for i, app := range apps {
		if requested[i] {
			key := app.GetNamespace() + "/" + app.GetName()
			keys = append(keys, key)
			requestedAt[key] = since[i]
		}
	}
	if len(keys) == 0 {
		return map[string]argocd.App{}
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return e.WaitApps(ctx, keys, func(app argocd.App) bool {
		return app.RefreshedSince(requestedAt[app.GetNamespace()+"/"+app.GetName()])
	})
}

// evaluate applies docs/design.md §5 to one Application as it is now,
// reading its session's records through log.
func (e *Engine) evaluate(ctx context.Context, log logReader, app argocd.App, argo *argocd.Server, notes []string) (*SessionStatus, error) {
	st, err := sessionStatus(ctx, log, app, argo != nil, notes)
	if err != nil {
		return nil, err
	}
	e.noteHold(ctx, app, st)
	e.noteLive(ctx, app, st)
	e.judgeTargets(ctx, app, argo, st)
	st.judgeReady()
	st.judgeForeignHold(app)
	// A pending patch is the annotation's word alone: it must not count
	// as caught up (nor override a logged one).
	if st.Untrusted != "" || st.SyncReenabled || st.Session.pending() != nil || len(st.Retargeted) > 0 {
		st.Ready = false
	}
	return st, nil
}

// sessionStatus starts app's status from its session as the verified
// audit records have it: the annotation is a pointer anyone may edit. A
// session the log does not have is the annotation's, untrusted.
func sessionStatus(ctx context.Context, log logReader, app argocd.App, fieldLevel bool, notes []string) (*SessionStatus, error) {
	annotated, err := SessionOf(app)
	if err != nil {
		return nil, err
	}
	ref := audit.AppRef{Namespace: app.GetNamespace(), Name: app.GetName(), Project: app.Project()}
	view, err := log.view(ctx, audit.AppRef{Namespace: ref.Namespace, Name: ref.Name}, annotated, !app.SyncsAutomatically())
	if err != nil {
		return nil, err
	}
	st := &SessionStatus{App: ref, Session: view.session, FieldLevel: fieldLevel, Notes: notes, Untrusted: view.untrusted, Mismatch: view.mismatch, annotated: annotated, trusted: view.session != nil}
	if view.session == nil {
		st.Session = annotated
	} else {
		st.InFlight = view.log.inFlight(time.Now())
		st.Proposal, st.ProposalPushes = view.log.proposal, view.log.proposing
		if pinned := view.log.log.Opened.Pinned; pinned != nil {
			st.Retargeted = argocd.PinChanges(*pinned, app.Pin(redact.Text))
		}
		// A run in flight writes the banner a step ahead of its record.
		if view.untrusted == "" && len(st.InFlight) == 0 {
			want := uiNotice(view.log.repaired(annotated))
			if differ := bannerDiffers(app, want); differ != "" {
				st.Mismatch, st.banner = append(st.Mismatch, differ), want
			}
		}
	}
	st.Expired = st.Session.Expired(time.Now())
	return st, nil
}

// noteHold notes what undoes the session's hold: automated sync on again
// behind it, on the Application or on a parent paused with it, an
// annotation the log contradicts, sources repointed since it opened.
func (e *Engine) noteHold(ctx context.Context, app argocd.App, st *SessionStatus) {
	session, ref := st.Session, audit.AppRef{Namespace: st.App.Namespace, Name: st.App.Name}
	// Still pausing (parents first) is what the log says too: no patch
	// recorded yet. The annotation's state alone would let anyone hide it.
	pausing := session.State == StatePausing && len(session.donePatches()) == 0
	if !pausing && session.pauses() && app.SyncsAutomatically() {
		st.SyncReenabled = true
		st.Notes = append(st.Notes, "automated sync is on again behind the session (Argo CD's toggle-auto-sync action, `argocd app set`, or an edit): Argo CD may have reverted the live fix; check the target, then close the session with `"+
			next.ForceRestore(ref.Namespace, ref.Name)+"` and break-glass again if the fix is gone")
	}
	// A parent paused with the session that syncs by itself again (its
	// mark removed and self-heal turned back on, by hand or through Argo
	// CD) would put the child's sync back from Git: the same as the
	// child's own sync coming back.
	if !pausing {
		for _, p := range session.PausedParents {
			parent, err := e.App(ctx, argocd.AppRef{Namespace: argocd.NamespaceOr(p.Namespace, app.GetNamespace()), Name: p.Name})
			if err == nil && parent.SyncsAutomatically() {
				st.SyncReenabled = true
				st.Notes = append(st.Notes, fmt.Sprintf("automated sync of parent application %s, paused with the session, is on again: it may sync %s back from Git over the live fix; check the target, then close the session with `%s`",
					p.Name, ref.Name, next.ForceRestore(ref.Namespace, ref.Name)))
			}
		}
	}
	switch disagreement := st.disagreement(); {
	case st.Untrusted != "":
		st.Notes = append(st.Notes, disagreement)
	case disagreement != "":
		st.Notes = append(st.Notes, disagreement+": the session is read from the audit log, which restore and --join act on; --join writes the annotation back from it")
	}
	if len(st.Retargeted) > 0 {
		st.Notes = append(st.Notes, fmt.Sprintf("%s (%s): whether Git caught up is judged only against the sources the session was opened against, so it is not; point it back, or close the session with `%s`",
			ErrRetargeted, strings.Join(st.Retargeted, "; "), next.ForceRestore(ref.Namespace, ref.Name)))
	}
}

// noteLive notes the live fix no longer holding, a patch being applied and
// runs interrupted.
func (e *Engine) noteLive(ctx context.Context, app argocd.App, st *SessionStatus) {
	session := st.Session
	if st.trusted && len(session.donePatches()) > 0 {
		switch reverted, err := e.reverted(ctx, app, session); {
		case err != nil:
			st.Notes = append(st.Notes, "could not check that the live fix still holds ("+argocd.Brief(err)+")")
		case len(reverted) > 0:
			st.Reverted = reverted
			st.Notes = append(st.Notes, fmt.Sprintf("REVERTED: the live fix no longer holds at %s; patch it again within the session (`%s`)", describeReverted(reverted), next.Join(st.App.Namespace, st.App.Name)))
		}
	}
	if pending := session.pending(); pending != nil {
		st.Notes = append(st.Notes, fmt.Sprintf("a patch of %s is being applied in session %s (since %s): not ready until it is done", pending.Target, session.ID, pending.At.Format(time.RFC3339)))
	}
	for _, run := range st.InFlight {
		if run.Gone != "" {
			st.Notes = append(st.Notes, fmt.Sprintf("the break-glass run of %s by %s, planned %s, was interrupted (%s): status and restore resolve it from the live target", run.Target, run.Actor, run.Planned.Format(time.RFC3339), run.Gone))
		}
	}
}

// judgeTargets judges, per patched target, whether Git has caught up
// (field by field with the Argo CD API, else from Argo CD's own compare),
// and the session as its least caught-up target.
func (e *Engine) judgeTargets(ctx context.Context, app argocd.App, argo *argocd.Server, st *SessionStatus) {
	session := st.Session
	now := app.Git()
	st.Revision, st.Revisions, st.Hydrated = now.Revision, now.Revisions, now.Hydrated
	moved := argocd.GitMoved(sessionGit(session), now)
	if argo == nil && session.holdsFields() && len(latestPatches(session)) > 0 {
		st.CannotTell = "the session holds its patched fields out of Argo CD's compare, and without the Argo CD API (ARGOCD_SERVER, ARGOCD_AUTH_TOKEN) nothing can tell when Git has them"
	}
	var manifests []map[string]any
	if argo != nil && moved {
		var err error
		if manifests, err = argo.Manifests(ctx, app.GetNamespace(), app.GetName(), now); err != nil {
			st.Notes = append(st.Notes, "field-level check unavailable ("+argocd.Brief(err)+")")
			st.FieldLevel = false
		}
	}
	dest := app.Destination().Namespace
	for _, p := range latestPatches(session) {
		ts := TargetState{Target: p.Target}
		ts.Resource, _ = app.ManagedStatus(p.Target)
		switch {
		case !moved:
			ts.Git, ts.Detail = GitWaiting, fmt.Sprintf("Git has not moved since %s", argocd.ShortRevisions(sessionGit(session)))
		case st.FieldLevel:
			ts.Git, ts.Detail = compareFields(p, findManifest(manifests, p.Target, dest), ts.Resource)
		case session.holdsFields():
			// Argo CD compares the held paths no more: Synced is its
			// answer for every other field, never for these.
			ts.Git, ts.Detail = GitWaiting, "the hold keeps the patched fields out of Argo CD's compare (ignoreDifferences), so Synced proves nothing there: set ARGOCD_SERVER (a read-only account is enough) for the field-level check, or force the restore once Git has the fix"
		case p.ArgoSawPatch == nil || !*p.ArgoSawPatch:
			ts.Git, ts.Detail = GitWaiting, "Argo CD never flagged this patch (it only adds fields Git never set), so Synced proves nothing: configure the Argo CD API for the field-level check, or force the restore"
		case ts.Resource == "Synced":
			ts.Git, ts.Detail = GitCaughtUp, fmt.Sprintf("Argo CD reports it Synced at %s", argocd.ShortRevisions(now))
		default:
			ts.Git, ts.Detail = GitWaiting, fmt.Sprintf("Git moved to %s but Argo CD reports %s (set ARGOCD_SERVER to tell waiting from diverged)", argocd.ShortRevisions(now), argocd.OrUnknown(ts.Resource))
		}
		st.Targets = append(st.Targets, ts)
	}
	st.Git = GitCaughtUp
	for _, t := range st.Targets {
		if t.Git == GitDiverged {
			st.Git = GitDiverged
			break
		}
		if t.Git == GitWaiting {
			st.Git = GitWaiting
		}
	}
}

// judgeForeignHold names the ignoreDifferences entries (and the hold's
// sync option) on app that are neither the Application's own when the
// session opened, as its planned record saved them, nor the session's
// hold of its own targets: a member appended one for .spec.replicas under
// --hold sync, Git moved for an unrelated reason, and an honest restore
// said Git had caught up, re-enabled sync and left Argo CD blind to the
// field for good. Argo CD compares those fields no more, so its Synced
// proves nothing: only the field-level check (which reads Git's values
// through the API) may still say caught up. The close puts the
// Application's own entries back, exactly.
func (st *SessionStatus) judgeForeignHold(app argocd.App) {
	s := st.Session
	if !st.trusted || (!s.ownIgnoreSaved && !s.holdsFields()) {
		return
	}
	own, patches := s.savedEntries(), latestPatches(s)
	var foreign []string
	for _, e := range app.IgnoreDifferences() {
		if !anyEqual(e, own) && !(s.holdsFields() && holdsTarget(e, patches)) {
			foreign = append(foreign, jsonText(e))
		}
	}
	var saved map[string]any
	_ = json.Unmarshal(s.SavedSyncPolicy, &saved)
	savedOptions, _ := saved["syncOptions"].([]any)
	if !s.holdsFields() && hasOption(app.SyncOptions()) && !slices.Contains(savedOptions, any(RespectIgnoreDifferences)) {
		foreign = append(foreign, "syncOptions "+RespectIgnoreDifferences)
	}
	if len(foreign) == 0 {
		return
	}
	st.Mismatch = append(st.Mismatch, fmt.Sprintf("ignoreDifferences: %s, neither the Application's own when the session opened nor its hold's", strings.Join(foreign, ", ")))
	if !st.FieldLevel {
		st.Ready = false
		st.Notes = append(st.Notes, "the Application ignores fields beyond its own ignoreDifferences and the session's hold ("+strings.Join(foreign, ", ")+"): Argo CD compares them no more, so Synced proves nothing; the close puts back the Application's own entries, and only the field-level check (ARGOCD_SERVER) or a forced restore closes the session")
	}
}

// holdsTarget is whether ignoreDifferences entry e names the target of
// one of patches, as the hold writes it.
func holdsTarget(e any, patches []SessionPatch) bool {
	m, ok := e.(map[string]any)
	if !ok {
		return false
	}
	str := func(k string) string { v, _ := m[k].(string); return v }
	for _, p := range patches {
		if str("kind") == p.Target.Kind && str("name") == p.Target.Name && str("group") == p.Target.Group && str("namespace") == p.Target.Namespace {
			return true
		}
	}
	return false
}

// judgeReady decides whether the session may be restored as far as Git
// goes: when every target caught up, or, with no patch yet, when no run
// is still opening it.
func (st *SessionStatus) judgeReady() {
	session := st.Session
	if len(session.Patches) > 0 {
		st.Ready = st.Git == GitCaughtUp
		return
	}
	// A run still opening the session (between the pause and the patch)
	// is no interruption: restoring now would re-enable sync under it, and
	// the controller would close every auto-restore session before its
	// fix.
	for _, run := range st.InFlight {
		if run.Gone == "" {
			st.Git, st.Ready = GitWaiting, false
			st.Targets = append(st.Targets, TargetState{Target: run.Target, Git: GitWaiting, Detail: fmt.Sprintf("the break-glass run by %s, planned %s, has not recorded its patch yet", run.Actor, run.Planned.Format(time.RFC3339))})
			st.Notes = append(st.Notes, fmt.Sprintf("session %s is being opened: the break-glass run by %s, planned %s, has not recorded its patch yet; not ready until it has, or until it is over (by %s)",
				session.ID, run.Actor, run.Planned.Format(time.RFC3339), run.Planned.Add(RunBound).Format(time.RFC3339)))
			return
		}
	}
	// Interrupted before the patch: nothing live differs from Git, so
	// restoring only undoes the pause.
	st.Git, st.Ready = GitCaughtUp, true
	st.Notes = append(st.Notes, fmt.Sprintf("session %s was interrupted in state %s before any patch: restore undoes the pause", session.ID, session.State))
}

// compareFields applies the field-level rule: every patched path must hold
// the patched value in Git's target state, and Argo CD must report Synced.
// Values are compared by digest: the session keeps no values.
func compareFields(p SessionPatch, desired map[string]any, resource string) (GitState, string) {
	if desired == nil {
		return GitDiverged, "Git no longer contains this resource: restoring would prune or revert it"
	}
	if len(p.Fields) == 0 {
		return GitWaiting, "the session lists no changed fields to compare: check Git by hand, then force the restore"
	}
	sawPatch := p.ArgoSawPatch != nil && *p.ArgoSawPatch
	for _, f := range p.Fields {
		got, _ := audit.Lookup(desired, f.Path)
		switch sum := digest(got); {
		case f.Secret && sawPatch && resource == "Synced":
			// No digest to compare (a secret, or free text recorded by
			// its structure), but Argo CD flagged the patch and now finds
			// the resource as Git has it: Git holds the live value.
			continue
		case f.Secret:
			return GitWaiting, f.Path + " holds a value that is not recorded (a secret or free text), and Argo CD does not report the patched resource Synced: force the restore once Git has it"
		case sum == f.After:
			continue
		case sum == f.Before:
			return GitWaiting, fmt.Sprintf("Git still has the value from before the patch at %s (%s)", f.Path, jsonText(redact.At(p.Target.GroupKind(), f.Path, got)))
		default:
			return GitDiverged, fmt.Sprintf("Git has %s at %s, which is not the live fix: restoring would revert the fix", jsonText(redact.At(p.Target.GroupKind(), f.Path, got)), f.Path)
		}
	}
	if resource != "Synced" {
		return GitWaiting, "Git holds the patched values but Argo CD reports " + argocd.OrUnknown(resource)
	}
	return GitCaughtUp, "Git holds the patched values and Argo CD reports Synced"
}

// latestPatches is one patch per target: the fields of every patch of it,
// a later value of a path superseding an earlier one, and Argo CD counted
// as having seen the patch only when it saw every one of them. A restore
// must not revert a field an earlier patch of the same target set.
func latestPatches(s *Session) []SessionPatch {
	var out []SessionPatch
	index := map[audit.Target]int{}
	for _, p := range s.Patches {
		i, ok := index[p.Target]
		if !ok {
			index[p.Target] = len(out)
			p.Fields = append([]PatchedField(nil), p.Fields...)
			out = append(out, p)
			continue
		}
		merged := &out[i]
		for _, f := range p.Fields {
			replaced := false
			for j := range merged.Fields {
				if merged.Fields[j].Path == f.Path {
					merged.Fields[j], replaced = f, true
				}
			}
			if !replaced {
				merged.Fields = append(merged.Fields, f)
			}
		}
		switch {
		case merged.ArgoSawPatch == nil || p.ArgoSawPatch == nil:
			merged.ArgoSawPatch = nil
		case !*p.ArgoSawPatch:
			merged.ArgoSawPatch = p.ArgoSawPatch
		}
		merged.At, merged.ID, merged.Type, merged.Pending = p.At, p.ID, p.Type, merged.Pending || p.Pending
	}
	return out
}

func findManifest(manifests []map[string]any, t audit.Target, defaultNamespace string) map[string]any {
	for _, m := range manifests {
		obj := unstructured.Unstructured{Object: m}
		gvk := obj.GroupVersionKind()
		ns := obj.GetNamespace()
		if ns == "" {
			ns = defaultNamespace
		}
		if gvk.Group == t.Group && gvk.Kind == t.Kind && obj.GetName() == t.Name && ns == t.Namespace {
			return m
		}
	}
	return nil
}

// Interrupted is whether a run of the session in flight has been
// interrupted, so that the next look resolves it (Resolve).
func (st *SessionStatus) Interrupted() bool {
	for _, run := range st.InFlight {
		if run.Gone != "" {
			return true
		}
	}
	return false
}

// Restorable is the one caught-up decision, which status' READY,
// --exit-code and --wait and restore all ask: every patched resource is
// caught up, as of a refresh Argo CD's controller made (a state as of an
// earlier reconcile may predate a revert in Git), and the annotation names
// the session the audit log has open there. Fields of the annotation the
// log contradicts (Mismatch) do not count: what is judged is the log's
// session.
func (st *SessionStatus) Restorable() bool {
	return st.Ready && !st.Stale && st.Untrusted == "" && !st.SyncReenabled
}

// disagreement names every way the session annotation disagrees with the
// audit log (Untrusted first, then Mismatch), "" when it agrees.
func (st *SessionStatus) disagreement() string {
	all := st.Mismatch
	if st.Untrusted != "" {
		all = append([]string{st.Untrusted}, all...)
	}
	if len(all) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %s", ErrSessionMismatch, strings.Join(all, "; "))
}

// GitAt is where Git stood at this status, as audit.Git has it.
func (st *SessionStatus) GitAt() audit.Git {
	return audit.Git{Revision: st.Revision, Revisions: st.Revisions, Hydrated: st.Hydrated}
}
