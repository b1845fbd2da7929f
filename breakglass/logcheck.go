package breakglass

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// loggedSession is what a session's verified audit records say about it,
// once the session state machine (audit.Sessions) has kept only the records
// the tool writes there: docs/design.md §8.
type loggedSession struct {
	log         *audit.SessionLog
	savedPolicy any
	parents     map[string]any
	parentNS    map[string]string
	patches     []*audit.Record
	// holder is the session the log says holds the Application (paused it
	// and did not close), "" when none.
	holder string
	// paused is whether a record says the Application itself was paused.
	paused bool
	// proposal is the newest Git change proposed for the session's fix;
	// proposing are the pushes of it started, oldest first.
	proposal  *audit.Proposal
	proposing []ProposalPush
}

// state is how far the session got, as its records say: pausing until
// the Application's own pause is recorded, paused, patched once a patch
// is.
func (ls *loggedSession) state() string {
	switch {
	case len(ls.patches) > 0:
		return StatePatched
	case ls.paused:
		return StatePaused
	}
	return StatePausing
}

// stateRank orders the session states.
func stateRank(state string) int {
	switch state {
	case StatePaused:
		return 1
	case StatePatched:
		return 2
	}
	return 0
}

// hasPlanned is whether a verified planned record opens the session.
func (ls *loggedSession) hasPlanned() bool { return ls.log != nil && ls.log.Opened != nil }

// logReader reads sessions from an audit log: the engine's, or what
// CaughtUpAll prefetched of it for many sessions at once.
type logReader struct{ audit.Store }

// log reads sessions from the engine's audit log.
func (e *Engine) log() logReader { return logReader{e.Audit} }

// session reads session id's records, and the records of app, from the
// audit log, keeping only records whose hash and actor stamp verify and
// that the session state machine accepts.
func (l logReader) session(ctx context.Context, app audit.AppRef, id string) (*loggedSession, error) {
	records, err := l.records(ctx, id)
	if err != nil {
		return nil, err
	}
	// Which session holds the Application comes from every session opened
	// on it: a session whose annotation names another, or that replays an
	// older one, is not the one the log has open there.
	ofApp, err := l.ofApp(ctx, app.Name)
	if err != nil {
		return nil, err
	}
	return foldSession(app, id, records, ofApp), nil
}

// ofApp reads the verified records labelled with Application name.
func (l logReader) ofApp(ctx context.Context, name string) ([]*audit.Record, error) {
	entries, err := l.Entries(ctx, audit.Filter{App: name})
	if err != nil {
		return nil, fmt.Errorf("reading application %s's audit records: %w", name, err)
	}
	return audit.Trusted(entries), nil
}

// records reads session id's verified records: by session, not by
// application, since a paused parent's record is labelled with the
// parent's name.
func (l logReader) records(ctx context.Context, id string) ([]*audit.Record, error) {
	entries, err := l.Entries(ctx, audit.Filter{Session: id})
	if err != nil {
		return nil, fmt.Errorf("reading session %s's audit records: %w", id, err)
	}
	return audit.Trusted(entries), nil
}

// ownLog is session id as its records among records tell it: those the
// session state machine accepts, in chain order, and the state reached (nil
// when none of its records is there).
func ownLog(records []*audit.Record, id string) ([]*audit.Record, *audit.SessionLog) {
	var own []*audit.Record
	for _, r := range records {
		if r.Session == id {
			own = append(own, r)
		}
	}
	legal, sessions := audit.Legal(own)
	return legal, sessions.Session(id)
}

// foldSession is session id as records (its own) and ofApp (those of
// app) tell it, both verified and in chain order.
func foldSession(app audit.AppRef, id string, records, ofApp []*audit.Record) *loggedSession {
	legal, log := ownLog(records, id)
	ls := &loggedSession{log: log, parents: map[string]any{}, parentNS: map[string]string{}}
	if !ls.hasPlanned() {
		return ls
	}
	if ls.log.Opened.SyncPolicy != nil {
		ls.savedPolicy = ls.log.Opened.SyncPolicy.Before
	}
	plans := map[string]*audit.Record{}
	for _, r := range legal {
		switch {
		case r.Event == audit.EventPlanned:
			plans[r.ID] = r
		case r.Event == audit.EventPatched && r.Outcome.Status == audit.StatusSucceeded && r.Resolves != "":
			// A resolver found an interrupted run's patch live: what it
			// changed is what that run planned, not what the resolver says.
			if plan := plans[r.Resolves]; plan != nil && plan.Patch != nil {
				landed := *plan
				landed.ID, landed.Time, landed.OutOfSync = r.ID, r.Time, r.OutOfSync
				ls.patches = append(ls.patches, &landed)
			}
		case r.Event == audit.EventPaused && r.Application != nil && r.Application.Name == app.Name && r.Application.Namespace == app.Namespace:
			ls.paused = ls.paused || r.Outcome.Status == audit.StatusSucceeded
		case r.Event == audit.EventPaused && r.Application != nil && (r.Application.Name != app.Name || r.Application.Namespace != app.Namespace) && r.SyncPolicy != nil:
			// Started is enough: the record is written before the pause.
			ls.parents[r.Application.Name] = r.SyncPolicy.Before
			ls.parentNS[r.Application.Name] = r.Application.Namespace
		case r.Event == audit.EventPatched && r.Outcome.Status == audit.StatusSucceeded && r.Patch != nil:
			ls.patches = append(ls.patches, r)
		case r.Event == audit.EventProposed && r.Proposal != nil && r.Outcome.Status == audit.StatusStarted:
			ls.proposing = append(ls.proposing, ProposalPush{At: r.Time, By: r.Actor.Username})
		case r.Event == audit.EventProposed && r.Proposal != nil:
			// A branch pushed whose request failed is a proposal too; one
			// only started (written ahead of the push) is not, nor a
			// failed push (its record names no proposal).
			ls.proposal = r.Proposal
		}
	}
	var mine []*audit.Record
	for _, r := range ofApp {
		if r.Application != nil && r.Application.Namespace == app.Namespace && r.Application.Name == app.Name {
			mine = append(mine, r)
		}
	}
	_, all := audit.Legal(mine)
	ls.holder = all.Holder(app)
	return ls
}

// untrusted names what makes the session the annotation points at not the
// Application's open session in the log: "" when it is.
func (ls *loggedSession) untrusted(app audit.AppRef, id string) string {
	switch {
	case !ls.hasPlanned():
		return "no verified audit record opens session " + id
	case ls.log.Application != app:
		return fmt.Sprintf("session %s was opened on application %s/%s, not on %s/%s", id, ls.log.Application.Namespace, ls.log.Application.Name, app.Namespace, app.Name)
	case !ls.log.Open():
		c := ls.log.Closed
		return fmt.Sprintf("session %s was closed by %s (audit record %d, by %s)", id, c.Event, c.Seq, c.Actor.Username)
	case ls.holder != "" && ls.holder != id:
		return fmt.Sprintf("the audit log's open session on %s is %s, not %s", app.Name, ls.holder, id)
	}
	return ""
}

// closedButHeld is whether the log closed session id of app while app
// still carries it: no other session holds app, and id was opened there.
func (ls *loggedSession) closedButHeld(app audit.AppRef, id string) bool {
	return ls.hasPlanned() && ls.log.Application == app && !ls.log.Open() && (ls.holder == "" || ls.holder == id)
}

// mismatches names each part of the session annotation that its audit
// records contradict, field by field.
func (ls *loggedSession) mismatches(app audit.AppRef, s *Session) []string {
	if why := ls.untrusted(app, s.ID); why != "" {
		return []string{why}
	}
	return ls.differences(s, ls.session(s))
}

// differences names each field of the annotation s that differs from the
// session logged, as the audit log has it (ls.session).
func (ls *loggedSession) differences(s, logged *Session) []string {
	var out []string
	differ := func(field string, annotation, log any) {
		if !equalJSON(annotation, log) {
			out = append(out, fmt.Sprintf("%s (annotation %s, audit log %s)", field, jsonText(annotation), jsonText(log)))
		}
	}
	differ("openedBy", s.OpenedBy, logged.OpenedBy)
	// The annotation runs ahead of the log by a step (each write comes
	// before its record), never behind it: "pausing" on a session the log
	// has paused would hide it from the re-enabled-sync check.
	if s.State != "" && stateRank(s.State) < stateRank(logged.State) {
		out = append(out, fmt.Sprintf("state (annotation %s, audit log %s)", jsonText(s.State), logged.State))
	}
	var saved any
	if err := json.Unmarshal(s.SavedSyncPolicy, &saved); err != nil || !equalJSON(saved, ls.savedPolicy) {
		out = append(out, fmt.Sprintf("savedSyncPolicy (annotation %s, audit log %s)", jsonText(saved), jsonText(ls.savedPolicy)))
	}
	differ("hold", s.Hold, logged.Hold)
	if logged.holdsFields() || logged.ownIgnoreSaved {
		var annotated, log any
		_ = json.Unmarshal(s.SavedIgnoreDifferences, &annotated)
		_ = json.Unmarshal(logged.SavedIgnoreDifferences, &log)
		differ("savedIgnoreDifferences", annotated, log)
	}
	differ("savedNotice", s.SavedNotice, logged.SavedNotice)
	differ("gitRevision", s.GitRevision, logged.GitRevision)
	differ("expires", s.Expires, logged.Expires)
	differ("autoRestore", s.AutoRestore, logged.AutoRestore)
	differ("propose", s.Propose, logged.Propose)
	differ("gitRevisions", s.GitRevisions, logged.GitRevisions)
	parents := map[string]any{}
	for _, p := range s.PausedParents {
		var policy any
		_ = json.Unmarshal(p.SavedSyncPolicy, &policy)
		parents[p.Name] = policy
	}
	if !sameParents(parents, ls.parents, s.State == StatePausing && logged.State == StatePausing) {
		out = append(out, fmt.Sprintf("pausedParents (annotation %s, audit log %s)", names(parents), names(ls.parents)))
	}
	if annotated, inFlight := len(s.Patches)-len(s.donePatches()), len(logged.Patches)-len(ls.patches); annotated != inFlight {
		out = append(out, fmt.Sprintf("pending patches (annotation %d, audit log %d runs in flight)", annotated, inFlight))
	}
	done := s.donePatches()
	if len(done) != len(ls.patches) {
		out = append(out, fmt.Sprintf("patches (annotation %d, audit log %d)", len(done), len(ls.patches)))
	} else {
		for i, p := range done {
			l := logged.Patches[i]
			switch {
			case p.Target != l.Target || p.Type != l.Type:
				out = append(out, fmt.Sprintf("patches[%d] (annotation %s, audit log record %s)", i, p.Target, ls.patches[i].ID))
			case !equalJSON(p.Fields, l.Fields):
				out = append(out, fmt.Sprintf("patches[%d].fields: paths or digests (audit log record %s)", i, ls.patches[i].ID))
			case p.ArgoSawPatch != nil && l.ArgoSawPatch != nil && *p.ArgoSawPatch != *l.ArgoSawPatch:
				out = append(out, fmt.Sprintf("patches[%d].argoSawPatch (annotation %t, audit log %t)", i, *p.ArgoSawPatch, *l.ArgoSawPatch))
			}
		}
	}
	if s.Ticket != "" && !ls.log.Tickets[s.Ticket] {
		out = append(out, fmt.Sprintf("ticket (annotation %s, not in the session's audit records)", s.Ticket))
	}
	return out
}

// session is the session as the audit log has it: what restore, --join,
// status and ticket sync act on. Only what the log cannot know comes from
// the annotation s: which of the runs in flight marked their patch as
// being sent, the Jira work still queued, the sync operation terminated.
func (ls *loggedSession) session(s *Session) *Session {
	opened := ls.log.Opened
	c := &Session{
		ID: ls.log.ID, State: ls.state(), OpenedBy: ls.log.Opener, OpenedAt: opened.Time,
		Reason: opened.Reason, Incident: opened.Incident,
		TicketPending: s.TicketPending, TerminatedSync: s.TerminatedSync,
		Expires: opened.Expires, AutoRestore: opened.AutoRestore, Propose: opened.Propose,
	}
	c.SavedSyncPolicy, _ = json.Marshal(ls.savedPolicy)
	c.SavedNotice = ls.savedNotice(s)
	if h := opened.Hold; h != nil {
		c.Hold, c.ownIgnoreSaved = h.Mode, h.Own
		if c.holdsFields() || h.Own {
			c.SavedIgnoreDifferences, _ = json.Marshal(h.IgnoreDifferences)
		}
	}
	// The pause written, its record not yet (an interruption between):
	// the annotation is a step ahead, and says so.
	if c.State == StatePausing && s.State == StatePaused {
		c.State = StatePaused
	}
	if opened.Git != nil {
		c.GitRevision, c.GitRevisions = opened.Git.Revision, opened.Git.Revisions
	}
	for _, name := range sortedKeys(ls.parents) {
		policy, _ := json.Marshal(ls.parents[name])
		c.PausedParents = append(c.PausedParents, PausedParent{Name: name, Namespace: ls.parentNS[name], SavedSyncPolicy: policy})
	}
	done := s.donePatches()
	for i, r := range ls.patches {
		p := SessionPatch{Type: r.Patch.Type, At: r.Time, ArgoSawPatch: r.OutOfSync, Fields: loggedFields(r)}
		if r.Target != nil {
			p.Target = *r.Target
		}
		if i < len(done) && done[i].Target == p.Target {
			p.ID = done[i].ID // the annotation's name for it
		}
		c.Patches = append(c.Patches, p)
	}
	// A patch still being sent is the annotation's word, believed only for
	// a run the log has in flight.
	for _, run := range ls.log.InFlight {
		if p := pendingFor(s, run); p != nil {
			c.Patches = append(c.Patches, *p)
		}
	}
	if s.Ticket != "" && ls.log.Tickets[s.Ticket] {
		c.Ticket = s.Ticket
	} else if keys := sortedKeys(ls.log.Tickets); len(keys) > 0 {
		c.Ticket = keys[len(keys)-1]
	}
	// The banner links it: the URL its record gave, never the
	// annotation's (a link to another host was the phishing channel).
	c.TicketURL = ls.log.TicketURLs[c.Ticket]
	return c
}

// savedNotice is the Application's own notice the session saved as its
// planned record has it; a planned record written before it kept one
// leaves the annotation's word (s).
func (ls *loggedSession) savedNotice(s *Session) map[string]string {
	own := ls.log.Opened.OwnNotice
	if own == nil {
		return s.SavedNotice
	}
	if len(own.Annotations) == 0 {
		return nil
	}
	return own.Annotations
}

// loggedFields are a patched record's changes as the session keeps them:
// paths, and digests of the values the record could keep; a value the
// record holds redacted is secret and keeps no digest.
func loggedFields(r *audit.Record) []PatchedField {
	out := make([]PatchedField, len(r.Changes))
	for i, c := range r.Changes {
		if redacted(c.Before) || redacted(c.After) {
			out[i] = PatchedField{Path: c.Path, Secret: true}
			continue
		}
		out[i] = PatchedField{Path: c.Path, Before: digest(c.Before), After: digest(c.After)}
	}
	return out
}

// redacted is whether v holds a value redaction removed.
func redacted(v any) bool {
	switch t := v.(type) {
	case string:
		return strings.Contains(t, audit.Redacted)
	case map[string]any:
		for _, x := range t {
			if redacted(x) {
				return true
			}
		}
	case []any:
		for _, x := range t {
			if redacted(x) {
				return true
			}
		}
	}
	return false
}

// donePatches are the patches that reached the target (not still pending).
func (s *Session) donePatches() []SessionPatch {
	var done []SessionPatch
	for _, p := range s.Patches {
		if !p.Pending {
			done = append(done, p)
		}
	}
	return done
}

// sameParents compares the parents of the annotation and of the log. A
// session interrupted while pausing may list a parent the log has not
// reached yet (or the reverse); the policies of parents in both must agree.
func sameParents(annotation, logged map[string]any, pausing bool) bool {
	for name, policy := range annotation {
		if l, ok := logged[name]; ok && !equalJSON(policy, l) || !ok && !pausing {
			return false
		}
	}
	for name := range logged {
		if _, ok := annotation[name]; !ok && !pausing {
			return false
		}
	}
	return true
}

func names(m map[string]any) string {
	return "[" + strings.Join(sortedKeys(m), ",") + "]"
}

// logView is the session to act on for an Application, as its verified
// audit log has it, and what the annotation gets wrong about it.
type logView struct {
	// session is the one the log has open on the Application, nil when it
	// has none there (the annotation was written by hand).
	session *Session
	// untrusted says why the session the annotation names is not the one
	// the log has open there as it is (it names another session, or one
	// the log closed): nothing acts on it then but a forced restore of the
	// log's open session. "" when the annotation names the log's open
	// session.
	untrusted string
	// mismatch names each field of the annotation the log contradicts:
	// named, never acted on (session is the log's).
	mismatch []string
	log      *loggedSession
}

// view is the session to act on for app, whose annotation holds
// annotated. paused is whether app's automated sync is off: a session the
// log closed is still held there only then.
func (l logReader) view(ctx context.Context, app audit.AppRef, annotated *Session, paused bool) (*logView, error) {
	ls, err := l.session(ctx, app, annotated.ID)
	if err != nil {
		return nil, err
	}
	why := ls.untrusted(app, annotated.ID)
	switch {
	case why == "":
		logged := ls.session(annotated)
		return &logView{session: logged, mismatch: ls.differences(annotated, logged), log: ls}, nil
	case paused && ls.closedButHeld(app, annotated.ID):
		// The log says closed, the Application still holds the session:
		// the close did not happen here. The session is the log's, up to
		// its close; it is never ready, and a forced restore ends it.
		c := ls.log.Closed
		logged := ls.session(annotated)
		return &logView{session: logged, log: ls, mismatch: ls.differences(annotated, logged),
			untrusted: fmt.Sprintf("%s: the audit log's %s (record %d, by %s) closed session %s, but the Application still holds it",
				audit.BreakCloseWithoutRestore, c.Event, c.Seq, c.Actor.Username, annotated.ID)}, nil
	case ls.holder != "" && ls.holder != annotated.ID:
		held, err := l.session(ctx, app, ls.holder)
		if err != nil {
			return nil, err
		}
		if held.untrusted(app, ls.holder) == "" {
			return &logView{session: held.session(&Session{}), untrusted: why, log: held}, nil
		}
	}
	return &logView{untrusted: why}, nil
}

// repaired is the annotation s written back from the log: every field the
// log knows as the log has it, and what only the annotation can know kept
// (the marks of runs the log has in flight, queued Jira work, the
// terminated sync), so that a write within the session
// mends whatever was edited behind it.
func (ls *loggedSession) repaired(s *Session) *Session {
	r := ls.session(s)
	// A run whose patch landed writes its mark done before it records
	// the patch: the log has the run in flight still.
	for _, run := range ls.log.InFlight {
		if p := s.patchNamed(run.ID); p != nil && !p.Pending {
			r.Patches = append(r.Patches, *p)
		}
	}
	return r
}
