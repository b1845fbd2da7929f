package audit

import (
	"fmt"
	"strings"
)

// The breaks of a session's meaning (docs/design.md §8): records whose
// hashes and links are fine, but which no run of the tool writes.
const (
	// BreakOutOfOrder is a session whose first record is not its
	// breakglass.planned.
	BreakOutOfOrder BreakKind = "out-of-order"
	// BreakForeignActor is a record in a session by someone who neither
	// opened nor joined it.
	BreakForeignActor BreakKind = "foreign-actor"
	// BreakForeignApplication is a record in a session about another
	// Application than the one the session was opened on (a paused parent
	// excepted).
	BreakForeignApplication BreakKind = "foreign-application"
	// BreakReplayed is a record in a session after its terminal record: a
	// second close, a join or a patch of a closed session.
	BreakReplayed BreakKind = "replayed"
	// BreakOverlapping is a session that paused an Application another
	// open session already holds.
	BreakOverlapping BreakKind = "overlapping"
	// BreakForeignTicket is a close naming a ticket its session never
	// filed or was attached to.
	BreakForeignTicket BreakKind = "foreign-ticket"
	// BreakCloseWithoutRestore is a close (restored, forced, aborted) that
	// the Application did not follow: it stayed held by the session until
	// a later close. Honest runs never close a session twice; a record
	// appended in someone's own name can.
	BreakCloseWithoutRestore BreakKind = "close-without-restore"
	// BreakSelfReview is a review by someone who opened or joined the
	// session (or one written before it closed).
	BreakSelfReview BreakKind = "self-review"
)

// PauseNotUndone is in the outcome error of a breakglass.aborted record
// whose undoing of the pause failed: the Application is still paused, so
// the record does not end the session (restore does).
const PauseNotUndone = "the pause could not be undone"

// Session phases, as the records move a session (docs/design.md §8).
const (
	PhasePlanned = "planned" // opened: planned, nothing paused yet
	PhaseHolding = "holding" // paused its Application (or a parent), maybe patched
	PhaseClosing = "closing" // a restore started
	PhaseClosed  = "closed"  // aborted, restored or forced
)

// SessionLog is one break-glass session as its records tell it: who opened
// it on which Application, who joined, how far it got.
type SessionLog struct {
	ID          string
	Application AppRef
	Opener      string
	// Members are the opener and everyone who joined (a later
	// breakglass.planned of the session); only their records count.
	Members map[string]bool
	Opened  *Record
	Phase   string
	// Closed is the terminal record, nil while open.
	Closed *Record
	// Tickets are the Jira keys the session's own records filed or
	// attached (nil until there is one).
	Tickets map[string]bool
	// TicketURLs are those tickets' URLs as their records give them, for
	// an open session: a link people follow comes from the log.
	TicketURLs map[string]string
	// Reviews are the session's breakglass.reviewed records, read by the
	// rules of review: the history and the verdict that stands.
	Reviews Reviews
	// Notices are its breakglass.expired and breakglass.reenabled records.
	Notices []*Record
	// InFlight are the planned records (the opening one and each join)
	// whose run has not recorded how its patch ended: patched, aborted, or
	// resolved for it after it was interrupted. Oldest first.
	InFlight []*Record
	joins    int
	patched  bool
	broken   bool
}

func (s *SessionLog) addTicket(t *Ticket) {
	if s.Tickets == nil {
		s.Tickets = map[string]bool{}
	}
	s.Tickets[t.Key] = true
	if t.URL != "" {
		if s.TicketURLs == nil {
			s.TicketURLs = map[string]string{}
		}
		s.TicketURLs[t.Key] = t.URL
	}
}

// Open says whether the session has no terminal record.
func (s *SessionLog) Open() bool { return s.Closed == nil }

// Noticed is the session's first notice of event by actor, nil when
// there is none.
func (s *SessionLog) Noticed(event Event, actor string) *Record {
	for _, r := range s.Notices {
		if r.Event == event && r.Actor.Username == actor {
			return r
		}
	}
	return nil
}

// Sessions checks records against the state machine of break-glass
// sessions, one record at a time in chain order, keeping a little state
// per session and per Application. Feed it only records whose hash and
// actor stamp verified.
type Sessions struct {
	byID map[string]*SessionLog
	// holders is the session holding each Application: it paused it and
	// has not closed.
	holders map[AppRef]string
	// lean forgets, once a session closes, what no later record of it is
	// checked against (its plan, its in-flight runs, its notices, the
	// close's body): audit verify keeps every session of a log that may
	// run to hundreds of thousands of records, and only the state machine
	// reads them there. A lean session's Opened is nil once closed.
	lean bool
	// closed are the lean check's closed sessions, kept compact (byID
	// no longer holds them); names interns what they repeat.
	closed map[string]*closedSession
	names  map[string]string
}

// closedSession is what a lean check keeps of a closed session: what a
// later record of it (ticket work, a review, a close again) is checked
// against, in about 200 bytes where the session's log took over a
// kilobyte. At 100,000 records audit verify holds 25,000 of them. Its
// maps are shared with the session log it expands to, never copied, so
// that a record after the close costs the same however many members or
// tickets the session has.
type closedSession struct {
	app AppRef
	// member is the one member, members every member when there are
	// more (nil otherwise).
	member  string
	members map[string]bool
	tickets map[string]bool
	reviews *Reviews
	seq     uint64
	event   Event
	actor   string
	status  string
}

// compact is s's closed form, its strings interned.
func (ss *Sessions) compact(s *SessionLog) *closedSession {
	in := func(v string) string {
		if w, ok := ss.names[v]; ok {
			return w
		}
		ss.names[v] = v
		return v
	}
	c := &closedSession{app: AppRef{Namespace: in(s.Application.Namespace), Name: in(s.Application.Name)}, tickets: s.Tickets,
		seq: s.Closed.Seq, event: Event(in(string(s.Closed.Event))), actor: in(s.Closed.Actor.Username), status: in(s.Closed.Outcome.Status)}
	if len(s.Members) == 1 {
		for m := range s.Members {
			c.member = in(m)
		}
	} else {
		c.members = s.Members
	}
	if len(s.Reviews.History) > 0 {
		reviews := s.Reviews
		c.reviews = &reviews
	}
	return c
}

// expand is c as a session log again, for a record of it to be checked.
func (c *closedSession) expand(id string) *SessionLog {
	s := &SessionLog{ID: id, Application: c.app, Members: c.members, Tickets: c.tickets, Phase: PhaseClosed,
		Closed: &Record{Seq: c.seq, Event: c.event, Session: id, Actor: Actor{Username: c.actor}, Outcome: Outcome{Status: c.status}}}
	if s.Members == nil {
		s.Members = map[string]bool{c.member: true}
	}
	if c.reviews != nil {
		s.Reviews = *c.reviews
	}
	return s
}

// lostToClose is whether r, of a closed session, is a run or a notice
// that lost the race to the close: it changed nothing, and nothing acts
// on it.
func lostToClose(r *Record) bool {
	switch r.Event {
	case EventRestored, EventForced:
		return r.Outcome.Status != StatusSucceeded
	case EventPlanned, EventAborted, EventExpired, EventReenabled, EventRetargeted, EventReverted, EventProposed:
		return true
	}
	return r.Resolves != "" && (r.Event == EventPatched || r.Event == EventAbandoned)
}

// NewSessions starts an empty check.
func NewSessions() *Sessions {
	return &Sessions{byID: map[string]*SessionLog{}, holders: map[AppRef]string{}}
}

// newLeanSessions starts an empty check that keeps of a closed session
// only what later records of it are checked against.
func newLeanSessions() *Sessions {
	ss := NewSessions()
	ss.lean, ss.closed, ss.names = true, map[string]*closedSession{}, map[string]string{}
	return ss
}

// Session is the session id as the records so far tell it, nil when none
// of its records came by.
func (ss *Sessions) Session(id string) *SessionLog {
	if c := ss.closed[id]; c != nil {
		return c.expand(id)
	}
	return ss.byID[id]
}

// Known says whether a record of session id came by.
func (ss *Sessions) Known(id string) bool {
	_, closed := ss.closed[id]
	return closed || ss.byID[id] != nil
}

// Holder is the session the records say holds app (paused and not
// closed), "" when none.
func (ss *Sessions) Holder(app AppRef) string { return ss.holders[appKey(app)] }

func appKey(a AppRef) AppRef { return AppRef{Namespace: a.Namespace, Name: a.Name} }

// Add moves r's session by r, returning whether r is one the tool writes
// there (only such records may be acted on) and the break when it is not.
// A record outside any session (no session id) is legal and moves nothing.
func (ss *Sessions) Add(r *Record) (bool, *Break) {
	if r.Session == "" {
		return true, nil
	}
	if c := ss.closed[r.Session]; c != nil {
		if lostToClose(r) {
			return false, nil
		}
		s := c.expand(r.Session)
		ok, b := ss.move(s, r)
		ss.closed[r.Session] = ss.compact(s)
		return ok, b
	}
	return ss.move(ss.byID[r.Session], r)
}

// move moves s (nil: a session none of whose records came by) by r.
func (ss *Sessions) move(s *SessionLog, r *Record) (bool, *Break) {
	broke := func(kind BreakKind, format string, args ...any) (bool, *Break) {
		return false, &Break{Kind: kind, Seq: r.Seq, Detail: fmt.Sprintf("session %s: ", r.Session) + fmt.Sprintf(format, args...)}
	}
	if s == nil {
		s = &SessionLog{ID: r.Session, Members: map[string]bool{}}
		ss.byID[r.Session] = s
		if r.Event != EventPlanned || r.Application == nil {
			s.broken = true
			return broke(BreakOutOfOrder, "its first record is %s, not %s naming the Application", r.Event, EventPlanned)
		}
		s.Application, s.Opener, s.Opened, s.Phase = appKey(*r.Application), r.Actor.Username, r, PhasePlanned
		s.Members[r.Actor.Username] = true
		s.InFlight = []*Record{r}
		return true, nil
	}
	if s.broken {
		return false, nil // named once, at the session's first record
	}
	// Jira work is done by whoever runs ticket sync, and restoring sync
	// once Git has the fix by whoever is on call then: neither needs to
	// have opened or joined the session.
	ticketWork := r.Event == EventQueued || r.Event == EventFiled || r.Event == EventFailed
	closing := r.Event == EventRestored || r.Event == EventForced
	// A notice about the session is written by whoever noticed.
	notice := r.Event == EventExpired || r.Event == EventReenabled || r.Event == EventRetargeted || r.Event == EventReverted
	// A proposal changes nothing in the cluster: whoever brings Git up
	// to the fix (the next shift too) may record one.
	proposal := r.Event == EventProposed
	// So is the end of an interrupted run's patch, naming its plan.
	resolving := r.Resolves != "" && (r.Event == EventPatched || r.Event == EventAbandoned)
	own := r.Application == nil || appKey(*r.Application) == s.Application
	if r.Event == EventReviewed {
		if !own {
			return broke(BreakForeignApplication, "%s names application %s/%s; the session was opened on %s/%s",
				r.Event, r.Application.Namespace, r.Application.Name, s.Application.Namespace, s.Application.Name)
		}
		var b *Break
		switch {
		case s.Closed == nil || s.Closed.Event == EventAborted:
			b = &Break{Kind: BreakOutOfOrder, Seq: r.Seq, Detail: fmt.Sprintf("reviewed by %s before the session was restored", r.Actor.Username)}
			s.Reviews.keep(r, b)
		case s.Members[r.Actor.Username]:
			b = &Break{Kind: BreakSelfReview, Seq: r.Seq, Detail: fmt.Sprintf("reviewed by %s, who opened or joined the session", r.Actor.Username)}
			s.Reviews.keep(r, b)
		default:
			b = s.Reviews.Add(r)
		}
		if b == nil {
			return true, nil
		}
		return broke(b.Kind, "%s", b.Detail)
	}
	switch {
	case s.Closed != nil && closing && r.Outcome.Status == StatusSucceeded:
		// The session was closed again: the close before did not close
		// the Application, or this one would have had nothing to restore.
		// This close is the one that counts.
		first := s.Closed
		s.Closed = r
		return true, &Break{Kind: BreakCloseWithoutRestore, Seq: first.Seq,
			Detail: fmt.Sprintf("session %s: %s by %s closed it, but the Application stayed held until %s by %s (record %d)", r.Session, first.Event, first.Actor.Username, r.Event, r.Actor.Username, r.Seq)}
	case s.Closed != nil && lostToClose(r):
		return false, nil
	case s.Closed != nil && !ticketWork:
		return broke(BreakReplayed, "%s after the session was closed by %s (record %d)", r.Event, s.Closed.Event, s.Closed.Seq)
	case !own && r.Event != EventPaused:
		return broke(BreakForeignApplication, "%s names application %s/%s; the session was opened on %s/%s",
			r.Event, r.Application.Namespace, r.Application.Name, s.Application.Namespace, s.Application.Name)
	case r.Event == EventPlanned:
		s.Members[r.Actor.Username] = true
		s.joins++
		s.InFlight = append(s.InFlight, r)
		return true, nil
	case resolving:
		// Two resolvers may race for one interrupted run (status, restore,
		// the controller): the first one counts, the others changed nothing.
		if s.takeInFlight(func(p *Record) bool { return p.ID == r.Resolves }) == nil {
			return false, nil
		}
		return true, nil
	case r.Event == EventAbandoned || r.Resolves != "":
		return broke(BreakOutOfOrder, "%s by %s resolves no interrupted run of the session", r.Event, r.Actor.Username)
	case !ticketWork && !closing && !notice && !proposal && !s.Members[r.Actor.Username]:
		return broke(BreakForeignActor, "%s by %s, who neither opened (%s) nor joined the session", r.Event, r.Actor.Username, s.Opener)
	}
	ok := r.Outcome.Status == StatusSucceeded
	// Jira work names only the session's own ticket: one its members
	// attached (--ticket), or the first one a ticket sync filed.
	if ticketWork && r.Ticket != nil && r.Ticket.Key != "" && !s.Tickets[r.Ticket.Key] {
		if !s.Members[r.Actor.Username] && (len(s.Tickets) > 0 || r.Event != EventFiled || !ok) {
			return broke(BreakForeignTicket, "%s by %s names ticket %s, which is not the session's", r.Event, r.Actor.Username, r.Ticket.Key)
		}
		s.addTicket(r.Ticket)
	}
	switch r.Event {
	case EventPaused:
		if r.Outcome.Status == StatusFailed {
			break
		}
		if holder := ss.holders[s.Application]; holder != "" && holder != s.ID {
			s.broken = true
			return broke(BreakOverlapping, "paused %s/%s, which session %s holds", s.Application.Namespace, s.Application.Name, holder)
		}
		ss.holders[s.Application] = s.ID
		if s.Phase == PhasePlanned {
			s.Phase = PhaseHolding
		}
	case EventPatched:
		s.patched = s.patched || ok
		s.takeInFlight(sameRun(r))
	case EventExpired, EventReenabled, EventRetargeted, EventReverted:
		s.Notices = append(s.Notices, r)
	case EventTicketed, EventFiled:
		if ok && r.Ticket != nil && r.Ticket.Key != "" {
			s.addTicket(r.Ticket)
		}
	case EventAborted:
		opening := s.joins == 0 && !s.patched
		if r.Outcome.Status == StatusStarted {
			// The opening run starts undoing its pause: from here another
			// session may open there, as after a started restore.
			if opening {
				ss.release(s)
			}
			break
		}
		s.takeInFlight(sameRun(r))
		// A joined patch that fails leaves the session as it was; the
		// opening break-glass failing before any patch ends it.
		switch {
		case opening && !strings.Contains(r.Outcome.Error, PauseNotUndone):
			ss.close(s, r)
		case opening && s.Phase == PhaseHolding && ss.holders[s.Application] == "":
			// The undo failed: the pause stands, and the session holds
			// the Application again until it is restored.
			ss.holders[s.Application] = s.ID
		}
	case EventRestored, EventForced:
		if r.Ticket != nil && r.Ticket.Key != "" && !s.Tickets[r.Ticket.Key] {
			return broke(BreakForeignTicket, "%s closes ticket %s, which the session never filed", r.Event, r.Ticket.Key)
		}
		switch r.Outcome.Status {
		case StatusStarted:
			// The restore removes the session from the Application: from
			// here another session may open there.
			s.Phase = PhaseClosing
			ss.release(s)
		case StatusSucceeded:
			ss.close(s, r)
		}
	}
	return true, nil
}

// sameRun matches the plan of the run whose outcome r is: the same actor
// and, where both records say (clients since the process id is recorded),
// the same process on the same host. Concurrent joins by one person are
// runs of their own: the outcome of one must not end another's plan.
func sameRun(r *Record) func(*Record) bool {
	return func(p *Record) bool {
		if p.Actor.Username != r.Actor.Username {
			return false
		}
		return p.Client.PID == 0 || r.Client.PID == 0 || (p.Client.PID == r.Client.PID && p.Client.Host == r.Client.Host)
	}
}

// takeInFlight removes the oldest in-flight plan that matches and returns
// it, nil when none does. A run's own outcome ends its plan (the oldest of
// its actor's: one run plans, then patches or aborts); a resolver names it.
func (s *SessionLog) takeInFlight(match func(*Record) bool) *Record {
	for i, p := range s.InFlight {
		if match(p) {
			s.InFlight = append(s.InFlight[:i:i], s.InFlight[i+1:]...)
			return p
		}
	}
	return nil
}

func (ss *Sessions) close(s *SessionLog, r *Record) {
	s.Closed, s.Phase = r, PhaseClosed
	ss.release(s)
	if ss.lean {
		// Kept: what a record after the close is checked against (who
		// the members were, the tickets, the reviews, and which record
		// closed it, named in a break).
		delete(ss.byID, s.ID)
		ss.closed[s.ID] = ss.compact(s)
	}
}

func (ss *Sessions) release(s *SessionLog) {
	if ss.holders[s.Application] == s.ID {
		delete(ss.holders, s.Application)
	}
}

// Legal keeps the records the session state machine accepts, in order, and
// returns the state it reached.
func Legal(records []*Record) ([]*Record, *Sessions) {
	ss := NewSessions()
	var out []*Record
	for _, r := range records {
		if ok, _ := ss.Add(r); ok {
			out = append(out, r)
		}
	}
	return out, ss
}
