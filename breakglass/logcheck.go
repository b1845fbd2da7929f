package breakglass

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// loggedSession is what a session's verified audit records say about it.
type loggedSession struct {
	savedPolicy any
	hasPlanned  bool
	parents     map[string]any
	parentNS    map[string]string
	patches     []*audit.Record
	tickets     map[string]bool
}

// sessionFromLog reads the session's records from the audit log, keeping
// only those whose hash and actor stamp verify.
func (e *Engine) sessionFromLog(ctx context.Context, app string, id string) (*loggedSession, error) {
	// By session, not by application: a paused parent's record is
	// labelled with the parent's name.
	entries, err := e.Audit.Entries(ctx, audit.Filter{Session: id})
	if err != nil {
		return nil, fmt.Errorf("reading session %s's audit records: %w", id, err)
	}
	ls := &loggedSession{parents: map[string]any{}, parentNS: map[string]string{}, tickets: map[string]bool{}}
	for _, r := range audit.Trusted(entries) {
		if r.Session != id {
			continue
		}
		switch {
		case r.Event == audit.EventPlanned && !ls.hasPlanned && r.SyncPolicy != nil:
			ls.savedPolicy, ls.hasPlanned = r.SyncPolicy.Before, true
		case r.Event == audit.EventPaused && r.Application != nil && r.Application.Name != app && r.SyncPolicy != nil:
			// Started is enough: the record is written before the pause.
			ls.parents[r.Application.Name] = r.SyncPolicy.Before
			ls.parentNS[r.Application.Name] = r.Application.Namespace
		case r.Event == audit.EventPatched && r.Outcome.Status == audit.StatusSucceeded:
			ls.patches = append(ls.patches, r)
		case (r.Event == audit.EventTicketed || r.Event == audit.EventFiled) && r.Outcome.Status == audit.StatusSucceeded && r.Ticket != nil && r.Ticket.Key != "":
			ls.tickets[r.Ticket.Key] = true
		}
	}
	return ls, nil
}

// mismatches names each part of the session annotation that its audit
// records contradict.
func (ls *loggedSession) mismatches(s *Session) []string {
	if !ls.hasPlanned {
		return []string{"no verified audit record opens session " + s.ID}
	}
	var out []string
	var saved any
	if err := json.Unmarshal(s.SavedSyncPolicy, &saved); err != nil || !equalJSON(saved, ls.savedPolicy) {
		out = append(out, fmt.Sprintf("savedSyncPolicy (annotation %s, audit log %s)", jsonText(saved), jsonText(ls.savedPolicy)))
	}
	parents := map[string]any{}
	for _, p := range s.PausedParents {
		var policy any
		_ = json.Unmarshal(p.SavedSyncPolicy, &policy)
		parents[p.Name] = policy
	}
	if !sameParents(parents, ls.parents, s.State == StatePausing) {
		out = append(out, fmt.Sprintf("pausedParents (annotation %s, audit log %s)", names(parents), names(ls.parents)))
	}
	var done []SessionPatch
	for _, p := range s.Patches {
		if !p.Pending {
			done = append(done, p)
		}
	}
	if len(done) != len(ls.patches) {
		out = append(out, fmt.Sprintf("patches (annotation %d, audit log %d)", len(done), len(ls.patches)))
	} else {
		for i, p := range done {
			r := ls.patches[i]
			if r.Target == nil || *r.Target != p.Target || !samePaths(p.Fields, r.Changes) {
				out = append(out, fmt.Sprintf("patches[%d] (annotation %s, audit log record %s)", i, p.Target, r.ID))
			}
		}
	}
	if s.Ticket != "" && !ls.tickets[s.Ticket] {
		out = append(out, fmt.Sprintf("ticket (annotation %s, not in the session's audit records)", s.Ticket))
	}
	return out
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

func samePaths(fields []PatchedField, changes []audit.Change) bool {
	if len(fields) != len(changes) {
		return false
	}
	for i := range fields {
		if fields[i].Path != changes[i].Path {
			return false
		}
	}
	return true
}

func names(m map[string]any) string {
	return "[" + strings.Join(sortedKeys(m), ",") + "]"
}

// fromLog replaces what restore writes back with what the audit log says:
// the saved policy, the paused parents and the ticket.
func (ls *loggedSession) fromLog(s *Session) *Session {
	c := ls.withLoggedParents(s)
	c.SavedSyncPolicy, _ = json.Marshal(ls.savedPolicy)
	if !ls.tickets[c.Ticket] {
		c.Ticket, c.TicketURL = "", ""
	}
	return c
}

// withLoggedParents is s with the parents the log says were (about to be)
// paused, whose policies restore writes back.
func (ls *loggedSession) withLoggedParents(s *Session) *Session {
	c := *s
	c.PausedParents = nil
	for _, name := range sortedKeys(ls.parents) {
		policy, _ := json.Marshal(ls.parents[name])
		c.PausedParents = append(c.PausedParents, PausedParent{Name: name, Namespace: ls.parentNS[name], SavedSyncPolicy: policy})
	}
	return &c
}
