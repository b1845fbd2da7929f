package breakglass

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// SessionAnnotation holds the open break-glass session on an Application.
const SessionAnnotation = audit.KeyPrefix + "session"

// LastSessionAnnotation is left on an Application when its session closes,
// {"id":"<ID>","closed":"restored|forced|aborted"}, so that Argo CD's
// notifications can announce the close once the session annotation is
// gone. The admission policy lets it change only with a close, naming the
// session that closed. Nothing in the tool reads it: it is a signal for
// people, and the audit log says how the session really ended.
const LastSessionAnnotation = audit.KeyPrefix + "last-session"

// lastSession is the LastSessionAnnotation value for session id closed by
// event (breakglass.restored, .forced or .aborted).
func lastSession(id string, event audit.Event) string {
	b, _ := json.Marshal(struct {
		ID     string `json:"id"`
		Closed string `json:"closed"`
	}{id, strings.TrimPrefix(string(event), "breakglass.")})
	return string(b)
}

// Session states, in order.
const (
	StatePausing = "pausing"
	StatePaused  = "paused"
	StatePatched = "patched"
)

// Session is the state of an open break-glass, kept as JSON in one
// annotation on the Application so that any later command can see it.
type Session struct {
	// ownIgnoreSaved is whether SavedIgnoreDifferences holds the
	// Application's own entries whatever the hold (the log's planned
	// record says so); without it, only a hold of fields saved them.
	ownIgnoreSaved bool
	ID             string    `json:"id"`
	State          string    `json:"state"`
	OpenedBy       string    `json:"openedBy"`
	OpenedAt       time.Time `json:"openedAt"`
	Reason         string    `json:"reason"`
	Incident       string    `json:"incident,omitempty"`
	// SavedSyncPolicy is spec.syncPolicy exactly as it was before the pause
	// (null when the Application had none); restore writes it back.
	SavedSyncPolicy json.RawMessage `json:"savedSyncPolicy"`
	PausedParents   []PausedParent  `json:"pausedParents,omitempty"`
	Patches         []SessionPatch  `json:"patches,omitempty"`
	// Ticket is the Jira issue tracking the session; TicketPending says
	// why Jira work is still queued for `ticket sync` ("" when none).
	Ticket        string `json:"ticket,omitempty"`
	TicketURL     string `json:"ticketURL,omitempty"`
	TicketPending string `json:"ticketPending,omitempty"`
	// GitRevision is where Git stood when the session opened, as audit.Git
	// has it; GitRevisions holds each source's, for several sources.
	GitRevision  string   `json:"gitRevision,omitempty"`
	GitRevisions []string `json:"gitRevisions,omitempty"`
	// TerminatedSync is when the sync operation this session terminated
	// before patching had started; empty when none was running.
	TerminatedSync string `json:"terminatedSync,omitempty"`
	// Expires is when the pause expires (nil: never); AutoRestore whether
	// sync comes back by itself once Git has caught up. The planned record
	// holds both; this is a copy.
	Expires     *time.Time `json:"expires,omitempty"`
	AutoRestore bool       `json:"autoRestore,omitempty"`
	// Propose is whether the fix is to be proposed in Git, by the
	// controller when nobody has (the planned record holds it).
	Propose bool `json:"propose,omitempty"`
	// SavedNotice is the Application's own Argo CD notice annotations,
	// which the session's banner replaces until the close puts them back.
	SavedNotice map[string]string `json:"savedNotice,omitempty"`
	// Hold is how the session holds the live fix (HoldApp, HoldSync; ""
	// for sessions opened before holds, which only pause), as the planned
	// record has it; SavedIgnoreDifferences is spec.ignoreDifferences as it
	// was before the hold added the session's entries (null when unset),
	// which the close writes back exactly.
	Hold                   string          `json:"hold,omitempty"`
	SavedIgnoreDifferences json.RawMessage `json:"savedIgnoreDifferences,omitempty"`
}

// Expired is whether the session's pause has expired at now.
func (s *Session) Expired(now time.Time) bool { return s.Expires != nil && !now.Before(*s.Expires) }

// SessionPatch is one patch of the session: which fields it changed, with
// digests of their values, never the values (those live in the audit
// record), so the annotation stays small whatever the patch.
type SessionPatch struct {
	Target audit.Target   `json:"target"`
	Type   string         `json:"type"`
	Fields []PatchedField `json:"fields"`
	At     time.Time      `json:"at"`
	// ArgoSawPatch is whether Argo CD flagged the patched resource
	// OutOfSync after the patch; nil until known. When false, the patch only
	// added fields Git never set and resource-level Synced proves nothing.
	ArgoSawPatch *bool `json:"argoSawPatch,omitempty"`
	// ID names the patch within the session; Pending is set while it is
	// being sent (the session learns of a patch before the target does).
	ID      string `json:"id,omitempty"`
	Pending bool   `json:"pending,omitempty"`
	// LegacyChanges are the values sessions opened by v0.1 kept; ParseSession
	// turns them into Fields.
	LegacyChanges []audit.Change `json:"changes,omitempty"`
}

// PatchedField is one field a patch changed: its path (list items by
// name, as Diff spells it) and the SHA-256 digests of its canonical JSON
// value before and after, which the catch-up check compares with Git. A
// secret field keeps no digests: a digest of a short password can be
// guessed.
type PatchedField struct {
	Path   string `json:"path"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	Secret bool   `json:"secret,omitempty"`
}

// SessionOf decodes the session annotation of app (an Application, as
// argocd.App or as the object the API server returned): an error when it
// carries none, or one that is not a session.
func SessionOf(app interface{ GetAnnotations() map[string]string }) (*Session, error) {
	return ParseSession(app.GetAnnotations()[SessionAnnotation])
}

// ParseSession decodes the session annotation.
func ParseSession(value string) (*Session, error) {
	var s Session
	if err := json.Unmarshal([]byte(value), &s); err != nil {
		return nil, fmt.Errorf("the %s annotation is not a session: %w", SessionAnnotation, err)
	}
	// The admission policy compares session ids by this prefix (CEL reads
	// no JSON): a value whose id is spelt elsewhere, or twice, is not one
	// the tool wrote.
	if prefix, _ := json.Marshal(struct {
		ID string `json:"id"`
	}{s.ID}); s.ID == "" || !strings.HasPrefix(value, strings.TrimSuffix(string(prefix), "}")+",") {
		return nil, fmt.Errorf("the %s annotation is not a session the tool wrote: it must start with its id, {\"id\":\"…\",", SessionAnnotation)
	}
	for i := range s.Patches {
		p := &s.Patches[i]
		for _, c := range p.LegacyChanges {
			if c.Before == audit.Redacted || c.After == audit.Redacted {
				p.Fields = append(p.Fields, PatchedField{Path: c.Path, Secret: true})
				continue
			}
			p.Fields = append(p.Fields, PatchedField{Path: c.Path, Before: digest(c.Before), After: digest(c.After)})
		}
		p.LegacyChanges = nil
	}
	return &s, nil
}

// sessionGit is where Git stood when session opened.
func sessionGit(s *Session) audit.Git {
	return audit.Git{Revision: s.GitRevision, Revisions: s.GitRevisions}
}

// PatchedBy is what app's open session patched, as its annotation says:
// drift names a field break-glass only when that session patched it.
func PatchedBy(app argocd.App) drift.Patched {
	s, err := SessionOf(app)
	if err != nil {
		return drift.Patched{}
	}
	out := drift.Patched{Session: s.ID, Restore: next.Restore(app.GetNamespace(), app.GetName()), Held: s.holdsFields()}
	for _, p := range s.Patches {
		fields := drift.PatchedFields{Target: p.Target}
		for _, f := range p.Fields {
			fields.Paths = append(fields.Paths, f.Path)
		}
		out.Fields = append(out.Fields, fields)
	}
	return out
}

// dropPatch removes the session's patch id.
func (s *Session) dropPatch(id string) {
	kept := s.Patches[:0]
	for _, sp := range s.Patches {
		if sp.ID != id {
			kept = append(kept, sp)
		}
	}
	s.Patches = kept
}

// patches is the session's patches with p, once: a new slice, unless p
// is there already.
func (s *Session) patches(p SessionPatch) []SessionPatch {
	if s.patchNamed(p.ID) != nil {
		return s.Patches
	}
	return append(slices.Clip(s.Patches), p)
}

// patchNamed returns the session's patch id, nil when it has none.
func (s *Session) patchNamed(id string) *SessionPatch {
	for i := range s.Patches {
		if s.Patches[i].ID == id {
			return &s.Patches[i]
		}
	}
	return nil
}

// ownSession accepts an Application whose session annotation is session id.
func ownSession(name, id string) func(argocd.App) error {
	return func(app argocd.App) error {
		s, err := SessionOf(app)
		if err != nil || s.ID != id {
			return fmt.Errorf("%w: the break-glass session %s on %s was closed or replaced by someone else", argocd.ErrConflict, id, name)
		}
		return nil
	}
}

// sessionPatch sets the session annotation and Argo CD's notice banner
// for it, requests a refresh and, when policy is not nil, patches
// spec.syncPolicy.
func sessionPatch(session *Session, policy any) map[string]any {
	value, _ := json.Marshal(session)
	annotations := uiNotice(session)
	annotations[SessionAnnotation] = string(value)
	patch := map[string]any{"metadata": map[string]any{
		"annotations": argocd.RefreshRequest(annotations, false),
	}}
	if policy != nil {
		patch["spec"] = map[string]any{"syncPolicy": policy}
	}
	return patch
}

// unchangedSession accepts an Application whose session is s as restore
// evaluated it: no patch it did not see, and none being sent by a run the
// log has in flight (logged, the session as the log has it). A patch that
// landed meanwhile must not be reverted by a restore that never saw it; a
// pending mark the log has no run for is the annotation's word alone, and
// does not hold a restore.
func unchangedSession(name string, s, logged *Session) func(argocd.App) error {
	seen := map[string]bool{}
	for _, p := range s.Patches {
		seen[p.ID] = true
	}
	return func(app argocd.App) error {
		if err := ownSession(name, s.ID)(app); err != nil {
			return err
		}
		current, _ := SessionOf(app)
		for _, p := range current.Patches {
			if !seen[p.ID] {
				return fmt.Errorf("%w: session %s on %s gained a patch of %s while restore ran: run restore again, it must check that patch too", argocd.ErrConflict, s.ID, name, p.Target)
			}
			if p.Pending && logged.patchNamed(p.ID) != nil && logged.patchNamed(p.ID).Pending {
				return fmt.Errorf("%w: a patch of %s is being applied in session %s (since %s): run restore again once it is done", argocd.ErrConflict, p.Target, s.ID, p.At.Format(time.RFC3339))
			}
		}
		return nil
	}
}

// pending is a patch of the session still being sent, nil when none is.
func (s *Session) pending() *SessionPatch {
	for i := range s.Patches {
		if s.Patches[i].Pending {
			return &s.Patches[i]
		}
	}
	return nil
}

// writeSession changes the session annotation (and requests a refresh),
// starting from known (the Application as last read, or argocd.Known), as
// long as the annotation still holds session id and also (nil: nothing
// more) accepts the Application: change is applied to the session as it
// is then, not as this command last saw it, so that concurrent --join
// patches never drop each other's patch. It returns the session and the
// Application as written.
func (e *Engine) writeSession(ctx context.Context, known argocd.App, id string, also func(argocd.App) error, change func(*Session)) (*Session, argocd.App, error) {
	return e.writeSessionWith(ctx, known, id, also, change, nil)
}

// writeSessionWith is writeSession whose write also patches spec with
// what spec returns for the Application as it is then (nil: nothing).
func (e *Engine) writeSessionWith(ctx context.Context, known argocd.App, id string, also func(argocd.App) error, change func(*Session), spec func(argocd.App) map[string]any) (*Session, argocd.App, error) {
	var written *Session
	own := ownSession(known.GetName(), id)
	check := func(app argocd.App) error {
		if err := own(app); err != nil || also == nil {
			return err
		}
		return also(app)
	}
	app, err := e.Write(ctx, known, argocd.Write{Check: check, Patch: func(app argocd.App) map[string]any {
		current, _ := SessionOf(app)
		change(current)
		written = current
		patch := sessionPatch(current, nil)
		if spec != nil {
			if held := spec(app); held != nil {
				patch["spec"] = held
			}
		}
		return patch
	}})
	return written, app, err
}

// knownApp is Application app, known only by namespace and name: a write
// starting from it reads it first.
func knownApp(app audit.AppRef) argocd.App {
	return argocd.Known(appRef(app))
}

// dropSession removes the session annotation of an aborted session if it
// is still session id's, leaving the sync policy alone. An Application
// that carries another session, or none (its write never landed), has
// nothing of this one to remove.
func (e *Engine) dropSession(ctx context.Context, app audit.AppRef, id string) error {
	name := app.Name
	_, err := e.Write(ctx, knownApp(app), argocd.Write{Check: func(app argocd.App) error {
		if ownSession(name, id)(app) != nil {
			return errNotPausedHere
		}
		return nil
	}, Patch: func(app argocd.App) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": closeSession(app, nil, audit.EventAborted)}}
	}})
	if errors.Is(err, errNotPausedHere) {
		return nil
	}
	return err
}

// closeSession is the annotations of a close of app's session: the
// session goes, and the LastSessionAnnotation says how it ended, naming
// the session the annotation named (which the admission policy reads; a
// forced restore of a repointed annotation closes the log's session).
// The notice goes back to the Application's own as logged, the session as
// its audit records have it, saved (its planned record's): never what the
// annotation says it saved, which anyone may have planted. Without a
// logged session (an abort's own write), the annotation's.
func closeSession(app argocd.App, logged *Session, closing audit.Event) map[string]any {
	annotations := map[string]any{SessionAnnotation: nil}
	s, err := SessionOf(app)
	switch {
	case err == nil:
		annotations[LastSessionAnnotation] = lastSession(s.ID, closing)
	case logged != nil:
	case strings.HasPrefix(app.GetAnnotations()[NoticeContent], noticePrefix):
		s = &Session{} // the banner is a session's; what it replaced is not known
	default:
		return annotations // the notice, if any, is not a session's
	}
	if logged != nil {
		s = logged
	}
	for k, v := range restoredNotice(s) {
		annotations[k] = v
	}
	return annotations
}

// withSession reads Application name, which must carry a session; why
// says what its absence means to the caller.
func (e *Engine) withSession(ctx context.Context, ref argocd.AppRef, why string) (argocd.App, error) {
	name := ref.Name
	app, err := e.App(ctx, ref)
	if err != nil {
		return argocd.App{}, err
	}
	if _, ok := app.GetAnnotations()[SessionAnnotation]; !ok {
		return argocd.App{}, fmt.Errorf("%w on %s, so %s", ErrNoSession, name, why)
	}
	return app, nil
}
