package breakglass

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// PauseMechanism is how a break-glass pauses automated sync.
type PauseMechanism int

// The pause mechanisms.
const (
	// PauseJoined is a patch within an open session: its pause stands.
	PauseJoined PauseMechanism = iota
	// PauseHoldFields pauses nothing: the patched fields are held.
	PauseHoldFields
	// PauseRemoveAutomated removes spec.syncPolicy.automated, which every
	// Argo CD version honours.
	PauseRemoveAutomated
	// PauseDisableAutomated sets automated.enabled to false (Argo CD ≥ 3.1).
	PauseDisableAutomated
)

// String says how the pause works, for people and -o json ("" for a join).
func (m PauseMechanism) String() string {
	switch m {
	case PauseHoldFields:
		return "none: automated sync stays on (--hold fields); only the patched fields are held"
	case PauseRemoveAutomated:
		return "remove spec.syncPolicy.automated (this Argo CD's Application schema has no automated.enabled)"
	case PauseDisableAutomated:
		return "set spec.syncPolicy.automated.enabled to false (Argo CD >= 3.1; prune and selfHeal stay visible)"
	}
	return ""
}

// pausedPolicy is the sync policy with automated sync off. With disable
// (Argo CD ≥ 3.1, whose schema has automated.enabled), automated stays and
// gets enabled: false, so prune and selfHeal remain visible; otherwise
// automated is removed, which every version honours. Everything else
// (syncOptions, retry) stays.
func pausedPolicy(policy any, disable bool) any {
	m, ok := policy.(map[string]any)
	if !ok {
		return policy
	}
	paused := map[string]any{}
	for k, v := range m {
		if k != "automated" {
			paused[k] = v
		}
	}
	if automated, ok := m["automated"].(map[string]any); ok && disable {
		off := map[string]any{}
		for k, v := range automated {
			off[k] = v
		}
		off["enabled"] = false
		paused["automated"] = off
	}
	return paused
}

// policyPatch is the merge patch that turns app's spec.syncPolicy into
// desired exactly: members desired lacks are deleted.
func policyPatch(app argocd.App, desired any) any {
	current := app.SyncPolicy()
	return mergePatchFor(current, desired)
}

// undoPause writes the saved policies back, the parents' first, and removes
// the session last (as long as check accepts it), so that an interruption
// leaves a session that says what is still paused; closing is the event
// that ends the session, left in the LastSessionAnnotation.
func (e *Engine) undoPause(ctx context.Context, ref audit.AppRef, s *Session, closing audit.Event, check func(argocd.App) error) error {
	// The child's check first: parents syncing again would undo the
	// child's pause from Git, so none is unpaused for a child that is not.
	app, err := e.App(ctx, appRef(ref))
	if err != nil {
		return err
	}
	if err := check(app); err != nil {
		return err
	}
	if err := e.restoreParents(ctx, ref, s); err != nil {
		return err
	}
	return e.restorePolicy(ctx, ref, s, closing, check)
}

// restorePolicy makes spec.syncPolicy the session's saved policy exactly,
// drops the session annotation for the LastSessionAnnotation (closing says
// how it ended) and requests a refresh, in one patch, as long as check
// accepts the Application as it is then. An Application
// whose sync was turned back on behind the session keeps its policy as it
// is (sync is on, as restore would leave it; the admission policy allows
// on-call no other change of it there): only the session goes.
func (e *Engine) restorePolicy(ctx context.Context, ref audit.AppRef, s *Session, closing audit.Event, check func(argocd.App) error) error {
	var saved any
	if err := json.Unmarshal(s.SavedSyncPolicy, &saved); err != nil {
		return fmt.Errorf("the session's saved sync policy is unreadable: %w", err)
	}
	var releaseErr error
	_, err := e.Write(ctx, knownApp(ref), argocd.Write{Check: check, Patch: func(app argocd.App) map[string]any {
		patch := map[string]any{"metadata": map[string]any{"annotations": argocd.RefreshRequest(closeSession(app, s, closing), false)}}
		whole := !app.SyncsAutomatically()
		// The hold goes with the session: ignoreDifferences (and the sync
		// option, when the policy is not written back whole) as saved.
		spec, err := releasePatch(app, s, whole)
		if err != nil {
			releaseErr = err
			spec = nil
		}
		if whole {
			if spec == nil {
				spec = map[string]any{}
			}
			spec["syncPolicy"] = policyPatch(app, saved)
		}
		if spec != nil {
			patch["spec"] = spec
		}
		return patch
	}})
	if err == nil && releaseErr != nil {
		return releaseErr
	}
	return err
}

// pause pauses the self-healing parents, then the Application, recording
// each. With parents, the child's session (state pausing, parents listed) is
// written first, so that an interruption at any point leaves a session that
// status shows and restore finishes: never a parent paused for nobody. On
// failure everything it paused is undone and recorded aborted.
func (e *Engine) pause(ctx context.Context, x *execution) ([]string, argocd.App, error) {
	session := x.session
	samePolicy := func(app argocd.App) error {
		if !equalJSON(app.SyncPolicy(), x.SyncPolicyBefore) {
			return fmt.Errorf("%w: the sync policy of %s changed since the plan; run the command again", argocd.ErrConflict, x.App.Name)
		}
		return nil
	}
	unchanged := func(app argocd.App) error {
		if _, open := app.GetAnnotations()[SessionAnnotation]; open {
			return e.explainConflict(ctx, x.App, fmt.Errorf("%w: a session was opened on %s meanwhile", ErrSessionOpen, x.App.Name))
		}
		return samePolicy(app)
	}
	var warnings []string
	// The first write starts from the plan's copy of the Application.
	known := x.app
	if known.Unstructured == nil {
		known = knownApp(x.App)
	}
	if len(x.parents) > 0 {
		var err error
		if warnings, err = e.pauseParents(ctx, x, known, unchanged); err != nil {
			return nil, argocd.App{}, err
		}
		unchanged = func(app argocd.App) error {
			if err := ownSession(x.App.Name, session.ID)(app); err != nil {
				return err
			}
			return samePolicy(app)
		}
		known = knownApp(x.App) // the session's write made the plan's copy stale
	}
	session.State = StatePaused
	// The same write marks the patch as being sent (markPending), one
	// write fewer before the fix; a session holding fields marks it with
	// the hold instead, which the admission policy allows only within
	// an open session.
	marked := session.Patches
	if !session.holdsFields() {
		marked = session.patches(x.pendingMark())
	}
	paused, err := e.Write(ctx, known, argocd.Write{Check: unchanged, Patch: func(app argocd.App) map[string]any {
		s := *session
		s.Patches = marked
		return sessionPatch(&s, policyPatch(app, x.SyncPolicyAfter))
	}})
	if err != nil {
		return nil, argocd.App{}, e.abortPause(ctx, x, fmt.Errorf("pausing %s: %w", x.App.Name, err), false)
	}
	if !session.holdsFields() {
		session.Patches, x.pendingPatch = marked, x.planned.ID
	}
	// The pause's record is written while Argo CD's controller takes the
	// pause up: both must be done before anything is patched, neither
	// waits for the other.
	recorded := start(func() (*audit.Record, error) {
		return e.recordSoon(ctx, x.subject(), session.ID, audit.EventPaused, audit.Outcome{Status: audit.StatusSucceeded}, func(r *audit.Record) {
			r.SyncPolicy = &audit.SyncPolicy{Before: x.SyncPolicyBefore, After: x.SyncPolicyAfter}
		})
	})
	if e.AfterPause != nil { // a test's hook, which runs once the pause is recorded
		if _, err := recorded.wait(); err != nil {
			return nil, argocd.App{}, e.unmark(ctx, x, err)
		}
		if err := e.AfterPause(ctx); err != nil {
			return nil, argocd.App{}, err
		}
	}
	// Argo CD's controller takes the pause up while the patch is sent: a
	// sync that a reconcile begun before the pause would start is refused
	// by the admission policy (kubectl-gitops-no-automated-sync-in-a-pause),
	// so the patch need not wait for the controller. An operation already
	// on the Application is waited for, so that the sync it starts can be
	// terminated before the patch.
	if session.pauses() && paused.SyncsAutomatically() {
		// The write did not pause: the schema the API server published
		// (or a cached answer about it) was not this Application's.
		return nil, argocd.App{}, e.abortPause(ctx, x, fmt.Errorf("pausing %s: automated sync is still on after the write (%s): nothing was patched; run the command again", x.App.Name, x.PauseMechanism), true)
	}
	x.confirmed = start(func() (argocd.App, error) { return e.WaitRefreshed(ctx, paused) })
	app := paused
	if _, operation := paused.Object["operation"]; operation || !x.guarded {
		var warning string
		app, warning = x.pauseConfirmed(e.ControllerTimeout())
		warnings = appendWarning(warnings, warning)
	}
	if _, err := recorded.wait(); err != nil {
		return nil, argocd.App{}, e.unmark(ctx, x, err)
	}
	return warnings, app, nil
}

// unmark drops the patch's pending mark the pause wrote when the pause's
// record could not be written (the audit log is down): nothing is patched,
// and a mark would hold every restore while the run looks alive. The pause
// stays, for restore to end, as after a failed abort record; err says why.
func (e *Engine) unmark(ctx context.Context, x *execution, err error) error {
	if x.pendingPatch == "" {
		return err
	}
	undo, cancel := undoContext(ctx)
	defer cancel()
	if _, _, dropErr := e.writeSession(undo, knownApp(x.App), x.session.ID, nil, func(s *Session) { s.dropPatch(x.pendingPatch) }); dropErr != nil {
		return fmt.Errorf("%w; the patch's mark in session %s could not be dropped either (%v): run `%s`", err, x.session.ID, dropErr, next.ForceRestore(x.App.Namespace, x.App.Name))
	}
	x.pendingPatch = ""
	return fmt.Errorf("%w; nothing was patched, and sync stays paused: run `%s`", err, next.Restore(x.App.Namespace, x.App.Name))
}

// PauseGuardPolicy is the admission policy (deploy/policy/applications.yaml)
// that refuses an automated sync on an Application a session holds paused.
const PauseGuardPolicy = "kubectl-gitops-no-automated-sync-in-a-pause"

// pauseGuarded is whether PauseGuardPolicy is in force: the policy and its
// binding, denying, as shipped. Unreadable counts as not in force.
func (e *Engine) pauseGuarded(ctx context.Context) bool {
	admission := e.Kube.AdmissionregistrationV1()
	if _, err := admission.ValidatingAdmissionPolicies().Get(ctx, PauseGuardPolicy, metav1.GetOptions{}); err != nil {
		return false
	}
	binding, err := admission.ValidatingAdmissionPolicyBindings().Get(ctx, PauseGuardPolicy, metav1.GetOptions{})
	if err != nil || binding.Spec.PolicyName != PauseGuardPolicy {
		return false
	}
	return slices.Contains(binding.Spec.ValidationActions, admissionregistrationv1.Deny)
}

// pauseConfirmed waits for Argo CD's controller to have reconciled the
// paused Application, returning it as then seen (nil when not), or a
// warning why it did not within timeout; "" once asked already.
func (x *execution) pauseConfirmed(timeout time.Duration) (argocd.App, string) {
	if x.confirmed == nil {
		return argocd.App{}, ""
	}
	app, err := x.confirmed.wait()
	x.confirmed = nil
	if err != nil {
		return argocd.App{}, fmt.Sprintf("Argo CD's controller did not confirm the pause within %s (%v): is it running? The patch was applied anyway.", timeout, err)
	}
	return app, ""
}

func appendWarning(warnings []string, warning string) []string {
	if warning == "" {
		return warnings
	}
	return append(warnings, warning)
}

// pauseParents opens the child's session (state pausing, parents listed),
// then pauses each self-healing parent, recording each: an interruption at
// any point leaves a session that status shows and restore finishes, never
// a parent paused for nobody. unchanged checks the child before the first
// write. On failure what it paused is undone and recorded aborted.
func (e *Engine) pauseParents(ctx context.Context, x *execution, known argocd.App, unchanged func(argocd.App) error) ([]string, error) {
	session := x.session
	for _, parent := range x.parents {
		session.PausedParents = append(session.PausedParents, savedParent(parent))
	}
	if _, err := e.Write(ctx, known, argocd.Write{Check: unchanged, Patch: func(argocd.App) map[string]any {
		return sessionPatch(session, nil)
	}}); err != nil {
		return nil, e.abortPause(ctx, x, fmt.Errorf("opening the session on %s: %w", x.App.Name, err), false)
	}
	var warnings []string
	for _, parent := range x.parents {
		parentRef := audit.AppRef{Namespace: argocd.NamespaceOr(parent.GetNamespace(), x.App.Namespace), Name: parent.GetName()}
		saved := savedParent(parent)
		var before any
		_ = json.Unmarshal(saved.SavedSyncPolicy, &before)
		withParent := func(r *audit.Record) {
			r.Application = &parentRef
			r.Target = nil
			r.SyncPolicy = &audit.SyncPolicy{Before: before, After: pausedPolicy(before, x.disableAutomated)}
		}
		if _, err := e.record(ctx, x.subject(), session.ID, audit.EventPaused, audit.Outcome{Status: audit.StatusStarted}, withParent); err != nil {
			return nil, e.abortPause(ctx, x, err, false)
		}
		pausedParent, err := e.pauseParent(ctx, parent, x.App.Name, session, x.disableAutomated)
		if err != nil {
			return nil, e.abortPause(ctx, x, fmt.Errorf("pausing parent application %s: %w", parent.GetName(), err), false)
		}
		if _, err := e.record(ctx, x.subject(), session.ID, audit.EventPaused, audit.Outcome{Status: audit.StatusSucceeded}, withParent); err != nil {
			return nil, err
		}
		if e.AfterParentPause != nil {
			if err := e.AfterParentPause(ctx); err != nil {
				return nil, err
			}
		}
		if _, err := e.WaitRefreshed(ctx, pausedParent); err != nil {
			warnings = append(warnings, fmt.Sprintf("Argo CD's controller did not confirm the pause of parent %s within %s", parent.GetName(), e.ControllerTimeout()))
		}
	}
	return warnings, nil
}

// abortPause undoes a pause that failed half-way: the parents paused for
// this session get their policy back and the child's session (if it was
// written) is removed, under a context Ctrl-C does not cancel; then
// breakglass.aborted says why.
// childWritten says the child's pause write itself succeeded (and did not
// pause): then the child's session is undone as a whole.
func (e *Engine) abortPause(ctx context.Context, x *execution, cause error, childWritten bool) error {
	session := x.session
	undo, cancel := undoContext(ctx)
	defer cancel()
	if recErr := e.startAbort(undo, x, cause.Error(), nil); recErr != nil {
		return fmt.Errorf("%v, and the undo was not started: %w; run `%s`", cause, recErr, next.Restore(x.App.Namespace, x.App.Name))
	}
	outcome := audit.Outcome{Status: audit.StatusFailed, Error: cause.Error()}
	err := cause
	var undoErr error
	if childWritten {
		undoErr = e.undoPause(undo, x.App, session, audit.EventAborted, ownSession(x.App.Name, session.ID))
	} else if undoErr = e.restoreParents(undo, x.App, session); undoErr == nil && len(session.PausedParents) > 0 {
		// The child carries the session written before its parents: left
		// there, it holds the Application, so the log must keep the
		// session open for restore to end.
		if err := e.dropSession(undo, x.App, session.ID); err != nil {
			undoErr = fmt.Errorf("removing session %s from %s: %w", session.ID, x.App.Name, err)
		}
	}
	if undoErr != nil {
		outcome.Error += "; " + audit.PauseNotUndone + ": " + undoErr.Error()
		err = fmt.Errorf("%w; the pause could not be undone (%v): run `%s`", cause, undoErr, next.Restore(x.App.Namespace, x.App.Name))
	}
	if _, recErr := e.record(undo, x.subject(), session.ID, audit.EventAborted, outcome, nil); recErr != nil {
		return fmt.Errorf("%v, and %w", err, recErr)
	}
	return err
}

// startAbort records, before an opening run undoes its pause, that the
// undo starts: from here the log holds the Application for no one, so a
// run killed between the undo and its outcome leaves the log agreeing
// with an Application that carries no session. The undo had come first,
// and such a kill left the log holding the Application for a session it
// no longer carried: the next break-glass overlapped it.
func (e *Engine) startAbort(ctx context.Context, x *execution, cause string, with func(*audit.Record)) error {
	_, err := e.record(ctx, x.subject(), x.session.ID, audit.EventAborted, audit.Outcome{Status: audit.StatusStarted, Error: cause}, with)
	return err
}

// undoContext is for steps that put things back: they must finish even when
// the user pressed Ctrl-C, within a bound of their own.
func undoContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// PausedParent is an app-of-apps parent paused with the session, with the
// policy restore writes back.
type PausedParent struct {
	Name string `json:"name"`
	// Namespace is the parent's, when it is not the child's (apps in any
	// namespace).
	Namespace       string          `json:"namespace,omitempty"`
	SavedSyncPolicy json.RawMessage `json:"savedSyncPolicy"`
}

// savedParent is parent's policy as the session keeps it.
func savedParent(parent argocd.App) PausedParent {
	policy := parent.SyncPolicy()
	saved, _ := json.Marshal(policy)
	return PausedParent{Name: parent.GetName(), Namespace: parent.GetNamespace(), SavedSyncPolicy: saved}
}

// pauseParent pauses parent for session, keeping its policy.
// It returns the parent as written.
func (e *Engine) pauseParent(ctx context.Context, parent argocd.App, child string, session *Session, disable bool) (argocd.App, error) {
	policy := parent.SyncPolicy()
	name := parent.GetName()
	return e.Write(ctx, argocd.Known(parent.Ref()), argocd.Write{Check: func(app argocd.App) error {
		if by, ok := app.GetAnnotations()[PausedByAnnotation]; ok {
			return fmt.Errorf("%w: parent application %s is already paused for %s", ErrSessionOpen, name, by)
		}
		if !equalJSON(app.SyncPolicy(), policy) {
			return fmt.Errorf("%w: the sync policy of parent %s changed meanwhile; run the command again", argocd.ErrConflict, name)
		}
		return nil
	}, Patch: func(app argocd.App) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"annotations": argocd.RefreshRequest(map[string]any{PausedByAnnotation: child + "/" + session.ID}, false)},
			"spec":     map[string]any{"syncPolicy": policyPatch(app, pausedPolicy(policy, disable))},
		}
	}})
}

// restoreParents writes back the saved policy of every parent paused for
// session, newest first.
func (e *Engine) restoreParents(ctx context.Context, child audit.AppRef, session *Session) error {
	for i := len(session.PausedParents) - 1; i >= 0; i-- {
		p := session.PausedParents[i]
		var saved any
		if err := json.Unmarshal(p.SavedSyncPolicy, &saved); err != nil {
			return fmt.Errorf("the saved policy of parent %s is unreadable: %w", p.Name, err)
		}
		_, err := e.Write(ctx, argocd.Known(argocd.AppRef{Namespace: argocd.NamespaceOr(p.Namespace, child.Namespace), Name: p.Name}), argocd.Write{Check: func(app argocd.App) error {
			switch by, marked := app.GetAnnotations()[PausedByAnnotation]; {
			case !marked:
				// Never paused (interrupted before) or already restored.
				return errNotPausedHere
			case by != child.Name+"/"+session.ID:
				return fmt.Errorf("%w: parent %s is paused for another session (%q)", argocd.ErrConflict, p.Name, by)
			}
			return nil
		}, Patch: func(app argocd.App) map[string]any {
			return map[string]any{
				"metadata": map[string]any{"annotations": argocd.RefreshRequest(map[string]any{PausedByAnnotation: nil}, false)},
				"spec":     map[string]any{"syncPolicy": policyPatch(app, saved)},
			}
		}})
		if err != nil && !errors.Is(err, errNotPausedHere) {
			return fmt.Errorf("restoring parent %s: %w", p.Name, err)
		}
	}
	return nil
}

// OrphanedPauses describes the Applications among apps that carry this
// project's paused-by mark (CHILD/SESSION) that the audit log does not
// account for: the session is not open, was opened on another child, or
// never recorded pausing this Application. Their sync stays off for
// nobody (the mark is set by hand with a pause the admission policy cannot
// tell from a parent's), exactly what a break-glass must never leave
// behind. What the annotations say is not trusted: only the log is.
func (e *Engine) OrphanedPauses(ctx context.Context, apps []argocd.App) ([]string, error) {
	var out []string
	for _, a := range apps {
		by, marked := a.GetAnnotations()[PausedByAnnotation]
		if !marked {
			continue
		}
		why, err := e.unaccounted(ctx, a, by)
		if err != nil {
			return nil, err
		}
		if why == "" {
			continue
		}
		out = append(out, fmt.Sprintf("application %s/%s is marked paused for session %q, %s: its automated sync may stay off for nobody; find its saved policy with `%s`",
			a.GetNamespace(), a.GetName(), by, why, next.AuditLog(a.GetName(), string(audit.EventPaused), true)))
	}
	return out, nil
}

// RecordOrphan records app's orphaned pause (why, as OrphanedPauses says
// it) or session annotation as a breakglass.orphaned notice outside any
// session, and emits a Warning Event of reason on app; warnings are what
// could not be told.
func (e *Engine) RecordOrphan(ctx context.Context, app argocd.App, reason, why string) ([]string, error) {
	actor, err := e.Whoami(ctx)
	if err != nil {
		return nil, err
	}
	ref := audit.AppRef{Namespace: app.GetNamespace(), Name: app.GetName()}
	ref.Project = app.Project()
	p := subject{actor: actor, app: ref, cluster: app.Destination().Server, reason: why}
	if _, err := e.record(ctx, p, "", audit.EventOrphaned, audit.Outcome{Status: audit.StatusSucceeded}, func(r *audit.Record) { r.Target = nil }); err != nil {
		return nil, err
	}
	if w := e.emit(ctx, app, reason, true, "%s", why); w != "" {
		return []string{w}, nil
	}
	return nil, nil
}

// UnaccountedSession says why app's session annotation is no session the
// audit log has open there, "" when the log has one (or there is no
// annotation): written by hand with a pause (the admission policy lets
// one appear, since CEL cannot read the log), copied from another
// Application, left by a closed session, or no session at all past the
// leading id the policy checks (an open session whose annotation is
// mangled past its id is the log's, and no orphan). It says nothing ("")
// while the log cannot be trusted to hold every open session: its head
// gone while records remain, or naming a record that is not stored (a
// lost log, a restore-log under way). Read app afresh: a cached one may
// still carry an annotation a close removed before its record.
func (e *Engine) UnaccountedSession(ctx context.Context, app argocd.App) (string, error) {
	value, annotated := app.GetAnnotations()[SessionAnnotation]
	if !annotated {
		return "", nil
	}
	s, parseErr := ParseSession(value)
	if parseErr != nil {
		id, _, _ := strings.Cut(strings.TrimPrefix(value, `{"id":"`), `"`)
		s = &Session{ID: id}
	}
	ref := audit.AppRef{Namespace: app.GetNamespace(), Name: app.GetName()}
	view, err := e.log().view(ctx, ref, s, !app.SyncsAutomatically())
	if err != nil || view.session != nil {
		return "", err
	}
	if lost, err := e.logLost(ctx); lost || err != nil {
		return "", err
	}
	if parseErr != nil {
		return parseErr.Error(), nil
	}
	return view.untrusted, nil
}

// logLost says whether the audit log cannot be trusted to hold every open
// session's records (see UnaccountedSession); stores that cannot tell say
// no.
func (e *Engine) logLost(ctx context.Context) (bool, error) {
	store, ok := e.Audit.(interface {
		Tip(context.Context) (uint64, error)
		StoredRecord(context.Context, uint64) (audit.Entry, bool, error)
	})
	if !ok {
		return false, nil
	}
	head, err := e.Audit.Head(ctx)
	if err != nil {
		return false, err
	}
	if head == nil {
		tip, err := store.Tip(ctx)
		return tip > 0, err
	}
	_, found, err := store.StoredRecord(ctx, head.Seq)
	return !found, err
}

// unaccounted says why the log does not account for app's paused-by mark
// by ("" when it does: an open session of the child it names paused app).
func (e *Engine) unaccounted(ctx context.Context, app argocd.App, by string) (string, error) {
	child, id, ok := strings.Cut(by, "/")
	if !ok || id == "" {
		return "which is not open", nil
	}
	records, err := e.log().records(ctx, id)
	if err != nil {
		return "", err
	}
	legal, log := ownLog(records, id)
	switch {
	case log == nil || log.Opened == nil || !log.Open():
		return "which is not open", nil
	case log.Application.Name != child:
		return fmt.Sprintf("which was opened on %s, not %s", log.Application.Name, child), nil
	}
	paused := false
	for _, r := range legal {
		paused = paused || r.Event == audit.EventPaused && r.Application != nil && r.Application.Name == app.GetName() && r.Application.Namespace == app.GetNamespace()
	}
	if !paused {
		return "which never recorded pausing it", nil
	}
	// Records in one's own name are trusted records too: a plan naming an
	// Application that does not exist and a pause of this one accounted
	// for a silent pause. The child the mark names must exist and carry
	// the session (it does from before its parents are paused until after
	// they are restored).
	carrier, err := e.App(ctx, argocd.AppRef{Namespace: log.Application.Namespace, Name: child})
	switch {
	case errors.Is(err, argocd.ErrAppNotFound):
		return fmt.Sprintf("whose Application %s/%s does not exist", log.Application.Namespace, child), nil
	case err != nil:
		return "", err
	}
	if s, err := ParseSession(carrier.GetAnnotations()[SessionAnnotation]); err != nil || s.ID != id {
		return fmt.Sprintf("which %s/%s does not carry", log.Application.Namespace, child), nil
	}
	return "", nil
}

// savedNotice is app's own notice annotations, which the session's banner
// replaces until it closes.
func savedNotice(app argocd.App) map[string]string {
	var saved map[string]string
	for _, k := range NoticeKeys {
		if v, ok := app.GetAnnotations()[k]; ok {
			if saved == nil {
				saved = map[string]string{}
			}
			saved[k] = v
		}
	}
	return saved
}

// uiNotice is the banner of open session s: critical, permanent, linking
// the ticket. It holds what the session holds (redacted reason and
// incident, paths, never values).
func uiNotice(s *Session) map[string]any {
	var held []string
	for _, p := range latestPatches(s) {
		paths := make([]string, len(p.Fields))
		for i, f := range p.Fields {
			paths[i] = f.Path
		}
		held = append(held, fmt.Sprintf("%s (%s)", p.Target, strings.Join(paths, ", ")))
	}
	what := "a live fix being applied"
	if len(held) > 0 {
		what = "the live fix of " + strings.Join(held, "; ")
	}
	text := fmt.Sprintf(noticePrefix+" Session %s by %s holds %s. Reason: %s.", s.ID, s.OpenedBy, what, s.Reason)
	if s.Incident != "" {
		text += " Incident " + s.Incident + "."
	}
	if s.Ticket != "" {
		text += " Ticket " + s.Ticket + "."
	}
	if s.Expires != nil {
		text += " Expires " + s.Expires.UTC().Format(time.RFC3339) + "."
	}
	if s.pauses() {
		text += " Sync stays paused until Git has the fix: " + next.Status("", "") + "."
	} else {
		text += " Automated sync stays on; only these fields are held until Git has the fix: " + next.Status("", "") + "."
	}
	if s.holdsFields() {
		text += " A Sync keeps the held fields only with " + RespectIgnoreDifferences + " ticked."
	}
	if r := []rune(text); len(r) > noticeMax {
		text = string(r[:noticeMax-1]) + "…"
	}
	notice := map[string]any{NoticeContent: text, NoticeSeverity: "critical", NoticePermanent: "true", NoticeURL: nil}
	if strings.HasPrefix(s.TicketURL, "https://") || strings.HasPrefix(s.TicketURL, "http://") {
		notice[NoticeURL] = s.TicketURL
	}
	return notice
}

// restoredNotice is the patch of the notice annotations that puts back
// what s saved when it opened.
func restoredNotice(s *Session) map[string]any {
	out := map[string]any{}
	for _, k := range NoticeKeys {
		if v, ok := s.SavedNotice[k]; ok {
			out[k] = v
		} else {
			out[k] = nil
		}
	}
	return out
}

// PausedByAnnotation marks a parent Application paused on behalf of a
// child's session: CHILD/SESSION.
const PausedByAnnotation = audit.KeyPrefix + "paused-by"

// errNotPausedHere is a parent the session lists but never paused (or
// already restored): there is nothing to put back.
var errNotPausedHere = errors.New("not paused by this session")

// The Warning Events of an orphaned pause and of a session annotation no
// session of the audit log accounts for.
const (
	EventOrphanedReason        = "OrphanedPause"
	EventOrphanedSessionReason = "OrphanedSession"
)

// Argo CD (3.5 and newer) shows an Application's notice annotations as a
// banner on its page and an icon in its lists (the Argo CD module's
// docs/user-guide/application-notice.md). While a session is open they
// tell whoever is about to press Sync that a break-glass holds the live
// fix; older versions ignore them.
const (
	NoticeContent   = "notice.argocd.argoproj.io/content"
	NoticeSeverity  = "notice.argocd.argoproj.io/severity"
	NoticeURL       = "notice.argocd.argoproj.io/url"
	NoticePermanent = "notice.argocd.argoproj.io/permanent"
)

// NoticeKeys are the notice annotations a session sets and puts back.
var NoticeKeys = []string{NoticeContent, NoticeSeverity, NoticeURL, NoticePermanent}

// noticePrefix starts every session's banner.
const noticePrefix = "BREAK-GLASS: do not sync."

// noticeMax is where Argo CD truncates a notice.
const noticeMax = 500

// EventUnrecordedSessionReason is the Warning Event of a session closed on
// an Application that the audit log never opened there.
const EventUnrecordedSessionReason = "UnrecordedSession"

// UnrecordedClose says why app's last-session mark names a close the audit
// log does not account for: a session it never opened on app, an older
// session's id reused, or (with ErrCloseSettling) a session it still has
// open; "" when it accounts for it (or there is no mark, or a session is
// open). The admission policy lets a member of the on-call
// group open a session by hand (a pause with an annotation) and close it
// (the mark with the restore), since CEL cannot read the log: whatever
// went on in between (a pause, a terminated sync, ignoreDifferences, the
// option that honours them, a banner) is in no record, and the mark is
// what is left of it. The planned record comes before anything a real
// session changes, so a mark the log has no plan for is never a run in
// flight. It says nothing while the log cannot be trusted to hold every
// session (see UnaccountedSession).
func (e *Engine) UnrecordedClose(ctx context.Context, app argocd.App) (string, error) {
	annotations := app.GetAnnotations()
	mark, marked := annotations[LastSessionAnnotation]
	if _, open := annotations[SessionAnnotation]; open || !marked {
		return "", nil
	}
	var closed struct {
		ID     string `json:"id"`
		Closed string `json:"closed"`
	}
	if err := json.Unmarshal([]byte(mark), &closed); err != nil || closed.ID == "" {
		closed.ID, _, _ = strings.Cut(strings.TrimPrefix(mark, `{"id":"`), `"`)
	}
	if closed.ID == "" {
		return "", nil // the policy lets no close write such a mark
	}
	records, err := e.log().records(ctx, closed.ID)
	if err != nil {
		return "", err
	}
	if len(records) == 0 {
		// A session closed before the controller pruned the log has no
		// records left in the cluster (the mirror has them): one whose
		// id, which starts with the time it opened, is older than the
		// cut is not judged. (An id backdated by hand gets past this in
		// a pruned log; verify --mirror reads the whole log.)
		if before, err := e.beforeCut(ctx, closed.ID); before || err != nil {
			return "", err
		}
	}
	var why string
	settling := false
	switch _, log := ownLog(records, closed.ID); {
	case log == nil || log.Opened == nil:
		why = "which the audit log never opened"
	case log.Application.Name != app.GetName() || log.Application.Namespace != app.GetNamespace():
		why = fmt.Sprintf("which the audit log opened on %s/%s, not here", log.Application.Namespace, log.Application.Name)
	case log.Closed == nil:
		// Closed on the Application, open in the log: by hand, or a
		// restore between its write and its record (or killed there).
		// The caller names it once it stays so (ErrCloseSettling).
		why = "which the audit log still has open: it was closed without a record (with kubectl, or a restore killed before its record)"
		settling = true
	default:
		// An older session's id, reused by hand to open and close
		// another, closes as that one: the mark then names a session
		// the log closed here before another it closed since.
		later, err := e.closedAfter(ctx, app, closed.ID)
		if err != nil || later == "" {
			return "", err
		}
		why = fmt.Sprintf("which the audit log closed here before session %s: an old session's id reused by hand", strconv.Quote(Clip(later, 120)))
	}
	if lost, err := e.logLost(ctx); lost || err != nil {
		if err == nil {
			err = ErrCannotTellYet
		}
		return "", err
	}
	// What it carries is read afresh (a cached Application may be only
	// its metadata), and only while the mark is the same.
	fresh, err := e.App(ctx, argocd.AppRef{Namespace: app.GetNamespace(), Name: app.GetName()})
	if err != nil {
		return "", err
	}
	if _, open := fresh.GetAnnotations()[SessionAnnotation]; open || fresh.GetAnnotations()[LastSessionAnnotation] != mark {
		return "", nil // changed since: its own event follows
	}
	app, annotations = fresh, fresh.GetAnnotations()
	var left []string
	if n := len(app.IgnoreDifferences()); n > 0 {
		left = append(left, fmt.Sprintf("%d spec.ignoreDifferences entries", n))
	}
	for _, o := range app.SyncOptions() {
		if strings.HasPrefix(o, "RespectIgnoreDifferences=") {
			left = append(left, "syncOptions "+o)
		}
	}
	if _, ok := annotations[NoticeContent]; ok {
		left = append(left, "an Argo CD notice banner")
	}
	has := "; it carries none of what a session leaves (ignoreDifferences, RespectIgnoreDifferences, a banner)"
	if len(left) > 0 {
		has = "; what it carries now that a session could have left, to compare with Git: " + strings.Join(left, ", ")
	}
	what := "a session opened and closed by hand, so what it did in between (a pause, a terminated sync, ignoreDifferences, a banner) is in no record"
	if settling {
		what = "what that close put back is nobody's word: compare the Application's own ignoreDifferences, sync options and notice with its planned record (" + next.AuditLog(app.GetName(), string(audit.EventPlanned), false) + ")"
	}
	msg := fmt.Sprintf("application %s/%s was closed for break-glass session %s, %s: %s%s. See when and with what with kubectl get application %s -n %s --show-managed-fields (the API server's audit log has who)",
		app.GetNamespace(), app.GetName(), strconv.Quote(Clip(closed.ID, 120)), why, what, has, app.GetName(), app.GetNamespace())
	if settling {
		return msg, ErrCloseSettling
	}
	return msg, nil
}

// ErrCloseSettling is UnrecordedClose's answer for a session the log
// still has open on an Application already closed: what a restore looks
// like between its write and its record. Name it only once it stays so.
var ErrCloseSettling = errors.New("closed on the Application, still open in the audit log")

// closedAfter is a session the audit log closed on app after it closed
// session id there ("" when none, or id is not closed there). A close the
// tool is making (its Application write before its record) is never
// after: the mark names the newest session then.
func (e *Engine) closedAfter(ctx context.Context, app argocd.App, id string) (string, error) {
	records, err := e.log().ofApp(ctx, app.GetName())
	if err != nil {
		return "", err
	}
	legal, sessions := audit.Legal(records)
	closedAt := map[string]uint64{}
	for _, r := range legal {
		s := sessions.Session(r.Session)
		if s != nil && s.Closed == r && s.Application.Name == app.GetName() && s.Application.Namespace == app.GetNamespace() {
			closedAt[r.Session] = r.Seq
		}
	}
	at, ok := closedAt[id]
	if !ok {
		return "", nil
	}
	later, latest := "", at
	for s, seq := range closedAt {
		if seq > latest {
			later, latest = s, seq
		}
	}
	return later, nil
}

// ErrCannotTellYet is a check that the audit log cannot answer now (its
// head gone with records left, or naming a record that is not there: a
// lost log, a restore-log under way): ask again later.
var ErrCannotTellYet = errors.New("the audit log cannot tell yet")

// beforeCut says whether session id opened before the cut of a pruned
// log (the start's checkpoint): its records may be gone with the prune.
// An id whose time cannot be read is judged as before a cut when there is
// one. A log never pruned has no cut.
func (e *Engine) beforeCut(ctx context.Context, id string) (bool, error) {
	store, ok := e.Audit.(interface {
		Start(context.Context) (*audit.StoredCheckpoint, error)
	})
	if !ok {
		return false, nil
	}
	start, err := store.Start(ctx)
	if err != nil || start == nil {
		return false, err
	}
	cut, err := audit.ParseCheckpoint(start.Payload)
	if err != nil {
		return true, nil // a start nobody can read: nothing is judged
	}
	stamp := id
	if len(stamp) > len("20060102-150405") {
		stamp = stamp[:len("20060102-150405")]
	}
	opened, err := time.Parse("20060102-150405", stamp)
	return err != nil || opened.Before(cut.Time), nil
}

// Clip is s cut to at most n bytes on a rune boundary, marked when cut:
// for values anyone could have written, quoted into a record or an Event.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
