package audit

import (
	"strconv"
	"strings"
	"testing"
)

// step is one record of a session story: event, session, actor,
// application and outcome, in a compact spelling.
type step struct {
	event   Event
	session string
	actor   string
	app     string
	status  string
	ticket  string
}

func (s step) record(seq int) *Record {
	r := &Record{Seq: uint64(seq), Event: s.event, Session: s.session, Actor: Actor{Username: s.actor}, Outcome: Outcome{Status: s.status}}
	if s.app != "" {
		r.Application = &AppRef{Namespace: "argocd", Name: s.app}
	}
	if s.ticket != "" {
		r.Ticket = &Ticket{Key: s.ticket}
	}
	if s.event == EventReviewed {
		r.Actor.Groups = []string{ReviewerGroup}
		r.Review = &Review{Verdict: VerdictApproved, Note: "checked"}
	}
	if r.Outcome.Status == "" {
		r.Outcome.Status = StatusSucceeded
	}
	if status, why, ok := strings.Cut(r.Outcome.Status, ": "); ok {
		r.Outcome = Outcome{Status: status, Error: why}
	}
	return r
}

// checks are the two ways of keeping sessions: whole (what the tool acts
// on) and lean (audit verify, which compacts closed ones); every story
// must read the same in both.
var checks = map[string]func() *Sessions{"whole": NewSessions, "lean": newLeanSessions}

// TestSessionStateMachine: honest stories pass whole; each illegal move is
// named, at the record that makes it.
func TestSessionStateMachine(t *testing.T) {
	opened := []step{
		{EventPlanned, "s", "alice", "web", StatusStarted, ""},
		{EventPaused, "s", "alice", "root", StatusStarted, ""},
		{EventPaused, "s", "alice", "root", "", ""},
		{EventPaused, "s", "alice", "web", "", ""},
		{EventPatched, "s", "alice", "web", "", ""},
		{EventTicketed, "s", "alice", "web", "", "OPS-1"},
	}
	restored := append(append([]step{}, opened...),
		step{EventRestored, "s", "carol", "web", StatusStarted, ""},
		step{EventRestored, "s", "carol", "web", "", "OPS-1"},
	)
	for name, tc := range map[string]struct {
		steps []step
		want  string // "kind at N", "" for none
	}{
		"open, restore by someone else, then ticket sync": {append(restored, step{EventFiled, "s", "dave", "web", "", "OPS-1"}), ""},
		"notices by the controller, then its restore": {append(append([]step{}, opened...),
			step{EventExpired, "s", "controller", "web", "", ""},
			step{EventReenabled, "s", "controller", "web", "", ""},
			step{EventRestored, "s", "controller", "web", "", "OPS-1"}), ""},
		"a notice that lost the race to the close is no break": {append(append([]step{}, restored...),
			step{EventExpired, "s", "controller", "web", "", ""}), ""},
		"a proposal by the next shift, then the restore": {append(append([]step{}, opened...),
			step{EventProposed, "s", "carol", "web", "", ""},
			step{EventRestored, "s", "controller", "web", "", "OPS-1"}), ""},
		"a proposal that lost the race to the close is no break": {append(append([]step{}, restored...),
			step{EventProposed, "s", "carol", "web", "", ""}), ""},
		"a proposal about another application": {append(append([]step{}, opened...),
			step{EventProposed, "s", "carol", "api", "", ""}), "foreign-application at 7"},
		"a notice about another application": {append(append([]step{}, opened...),
			step{EventExpired, "s", "controller", "api", "", ""}), "foreign-application at 7"},
		"a join, whose failed patch leaves the session open": {append(append([]step{}, opened...),
			step{EventPlanned, "s", "bob", "web", StatusStarted, ""},
			step{EventAborted, "s", "bob", "web", StatusFailed, ""},
			step{EventPatched, "s", "bob", "web", "", ""},
			step{EventRestored, "s", "alice", "web", "", "OPS-1"}), ""},
		"two racing opens, one aborted": {[]step{
			{EventPlanned, "a", "alice", "web", StatusStarted, ""},
			{EventPlanned, "b", "bob", "web", StatusStarted, ""},
			{EventPaused, "a", "alice", "web", "", ""},
			{EventAborted, "b", "bob", "web", StatusFailed, ""}}, ""},
		"an interrupted plan, then a new session": {[]step{
			{EventPlanned, "a", "alice", "web", StatusStarted, ""},
			{EventPlanned, "b", "bob", "web", StatusStarted, ""},
			{EventPaused, "b", "bob", "web", "", ""}}, ""},
		"a session after a restore": {append(append([]step{}, restored...),
			step{EventPlanned, "t", "bob", "web", StatusStarted, ""},
			step{EventPaused, "t", "bob", "web", "", ""}), ""},
		"a failed undo leaves the session to restore": {[]step{
			{EventPlanned, "s", "alice", "web", StatusStarted, ""},
			{EventPaused, "s", "alice", "web", "", ""},
			{EventAborted, "s", "alice", "web", StatusFailed + ": patch rejected; " + PauseNotUndone + ": timeout", ""},
			{EventRestored, "s", "carol", "web", "", ""}}, ""},
		"an abort killed after its undo leaves the Application to the next session": {[]step{
			{EventPlanned, "s", "alice", "web", StatusStarted, ""},
			{EventPaused, "s", "alice", "web", "", ""},
			{EventAborted, "s", "alice", "web", StatusStarted + ": patch rejected", ""},
			{EventPlanned, "t", "bob", "web", StatusStarted, ""},
			{EventPaused, "t", "bob", "web", "", ""}}, ""},
		"an undo that failed holds the Application again": {[]step{
			{EventPlanned, "s", "alice", "web", StatusStarted, ""},
			{EventPaused, "s", "alice", "web", "", ""},
			{EventAborted, "s", "alice", "web", StatusStarted + ": patch rejected", ""},
			{EventAborted, "s", "alice", "web", StatusFailed + ": patch rejected; " + PauseNotUndone + ": timeout", ""},
			{EventPlanned, "t", "mallory", "web", StatusStarted, ""},
			{EventPaused, "t", "mallory", "web", "", ""}}, "overlapping at 6"},
		"a started abort of a join releases nothing": {append(append([]step{}, opened...),
			step{EventPlanned, "s", "bob", "web", StatusStarted, ""},
			step{EventAborted, "s", "bob", "web", StatusStarted, ""},
			step{EventPlanned, "t", "mallory", "web", StatusStarted, ""},
			step{EventPaused, "t", "mallory", "web", "", ""}), "overlapping at 10"},
		"an abort that put everything back ends the session": {[]step{
			{EventPlanned, "s", "alice", "web", StatusStarted, ""},
			{EventPaused, "s", "alice", "web", "", ""},
			{EventAborted, "s", "alice", "web", StatusFailed + ": patch rejected", ""},
			{EventRestored, "s", "carol", "web", "", ""}}, "close-without-restore at 3"},
		"a racing restore that lost": {append(append([]step{}, restored...),
			step{EventRestored, "s", "dave", "web", StatusStarted, ""},
			step{EventRestored, "s", "dave", "web", StatusFailed, ""}), ""},
		"a ticket the opener attached":               {append(append([]step{}, opened...), step{EventQueued, "s", "alice", "web", StatusQueued, "OPS-5"}), ""},
		"Jira work naming another ticket":            {append(append([]step{}, opened...), step{EventQueued, "s", "dave", "web", StatusQueued, "OPS-999"}), "foreign-ticket at 7"},
		"a review by someone else after the restore": {append(append([]step{}, restored...), step{EventReviewed, "s", "rita", "web", "", ""}), ""},
		"a review by the opener":                     {append(append([]step{}, restored...), step{EventReviewed, "s", "alice", "web", "", ""}), "self-review at 9"},
		"a review before the restore":                {append(append([]step{}, opened...), step{EventReviewed, "s", "rita", "web", "", ""}), "out-of-order at 7"},
		"first record not the plan":                  {[]step{{EventPatched, "s", "alice", "web", "", ""}}, "out-of-order at 1"},
		"a patch by a stranger":                      {append(append([]step{}, opened...), step{EventPatched, "s", "mallory", "web", "", ""}), "foreign-actor at 7"},
		"a patch of another application":             {append(append([]step{}, opened...), step{EventPatched, "s", "alice", "db", "", ""}), "foreign-application at 7"},
		// A second close says the first did not close the Application.
		"a second restore": {append(append([]step{}, restored...), step{EventRestored, "s", "carol", "web", "", ""}), "close-without-restore at 8"},
		"a join that lost the race to the close": {append(append([]step{}, restored...),
			step{EventPlanned, "s", "bob", "web", StatusStarted, ""},
			step{EventAborted, "s", "bob", "web", StatusFailed, ""}), ""},
		"a patch after the close": {append(append([]step{}, restored...), step{EventPatched, "s", "alice", "web", "", ""}), "replayed at 9"},
		"a patch after an abort": {[]step{
			{EventPlanned, "s", "alice", "web", StatusStarted, ""},
			{EventAborted, "s", "alice", "web", StatusFailed, ""},
			{EventPatched, "s", "alice", "web", "", ""}}, "replayed at 3"},
		"a second session pausing a held application": {append(append([]step{}, opened...),
			step{EventPlanned, "t", "mallory", "web", StatusStarted, ""},
			step{EventPaused, "t", "mallory", "web", "", ""}), "overlapping at 8"},
		"a close naming another session's ticket":           {append(append([]step{}, opened...), step{EventRestored, "s", "carol", "web", "", "OPS-9"}), "foreign-ticket at 7"},
		"ticket sync after the close naming another ticket": {append(append([]step{}, restored...), step{EventFiled, "s", "dave", "web", "", "OPS-2"}), "foreign-ticket at 9"},
		"two reviews after the restore, the second by a member": {append(append([]step{}, restored...),
			step{EventReviewed, "s", "rita", "web", "", ""},
			step{EventReviewed, "s", "alice", "web", "", ""}), "self-review at 10"},
		"a review of another application after the restore": {append(append([]step{}, restored...), step{EventReviewed, "s", "rita", "db", "", ""}), "foreign-application at 9"},
		"a third close after a second": {append(append([]step{}, restored...),
			step{EventForced, "s", "carol", "web", "", ""},
			step{EventPatched, "s", "alice", "web", "", ""}), "close-without-restore at 8"},
	} {
		var reads []string
		for check, start := range checks {
			ss := start()
			var got []string
			for i, st := range tc.steps {
				if _, b := ss.Add(st.record(i + 1)); b != nil {
					got = append(got, string(b.Kind)+" at "+strconv.FormatUint(b.Seq, 10)+": "+b.Detail)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("%s (%s): breaks %v, want none", name, check, got)
			case tc.want != "" && (len(got) < 1 || !strings.HasPrefix(got[0], tc.want+":")):
				t.Errorf("%s (%s): breaks %v, want first %s", name, check, got, tc.want)
			}
			reads = append(reads, strings.Join(got, "\n"))
		}
		if reads[0] != reads[1] {
			t.Errorf("%s: the whole and lean checks read it differently:\n%s\n--\n%s", name, reads[0], reads[1])
		}
	}
}

// TestSessionHolder: the Application is held from the pause until the
// restore starts, and a session that overlaps never takes it.
func TestSessionHolder(t *testing.T) {
	web := AppRef{Namespace: "argocd", Name: "web"}
	ss := NewSessions()
	for i, st := range []step{
		{EventPlanned, "s", "alice", "web", StatusStarted, ""},
		{EventPaused, "s", "alice", "web", "", ""},
		{EventPlanned, "t", "mallory", "web", StatusStarted, ""},
		{EventPaused, "t", "mallory", "web", "", ""},
	} {
		ss.Add(st.record(i + 1))
	}
	if h := ss.Holder(web); h != "s" {
		t.Fatalf("holder %q, want s", h)
	}
	ss.Add(step{EventRestored, "s", "carol", "web", StatusStarted, ""}.record(5))
	if h := ss.Holder(web); h != "" {
		t.Errorf("holder after the restore started: %q", h)
	}
	if s := ss.Session("s"); s.Phase != PhaseClosing || !s.Open() {
		t.Errorf("session s: phase %s, open %v", s.Phase, s.Open())
	}
}

// TestInFlightPlans: a run's plan stays in flight until its own patched or
// aborted record, or until a resolver (anyone) names it; a resolver that
// names no plan in flight is refused, a second one for the same plan
// changed nothing.
func TestInFlightPlans(t *testing.T) {
	rec := func(seq int, event Event, actor, resolves string) *Record {
		r := step{event, "s", actor, "web", "", ""}.record(seq)
		r.ID, r.Resolves = "r"+strconv.Itoa(seq), resolves
		return r
	}
	story := []*Record{
		rec(1, EventPlanned, "alice", ""),
		rec(2, EventPaused, "alice", ""),
		rec(3, EventPatched, "alice", ""),
		rec(4, EventPlanned, "bob", ""), // bob joins, and his run is killed
		rec(5, EventPlanned, "alice", ""),
	}
	ss := NewSessions()
	for _, r := range story {
		if ok, b := ss.Add(r); !ok {
			t.Fatalf("record %d refused: %+v", r.Seq, b)
		}
	}
	inFlight := func() (ids []string) {
		for _, p := range ss.Session("s").InFlight {
			ids = append(ids, p.ID)
		}
		return ids
	}
	if got := strings.Join(inFlight(), ","); got != "r4,r5" {
		t.Fatalf("in flight %s, want r4,r5", got)
	}
	// carol, no member, resolves bob's run: accepted, and only that plan ends.
	if ok, b := ss.Add(rec(6, EventAbandoned, "carol", "r4")); !ok {
		t.Fatalf("a resolver's record refused: %+v", b)
	}
	if got := strings.Join(inFlight(), ","); got != "r5" {
		t.Errorf("in flight %s after resolving r4, want r5", got)
	}
	if ok, b := ss.Add(rec(7, EventPatched, "dave", "r4")); ok || b != nil {
		t.Errorf("a second resolver of r4: accepted %v, break %+v; want ignored", ok, b)
	}
	if ok, b := ss.Add(rec(8, EventAbandoned, "dave", "")); ok || b == nil || b.Kind != BreakOutOfOrder {
		t.Errorf("an abandoned record naming no plan: accepted %v, break %+v", ok, b)
	}
	if ok, b := ss.Add(rec(9, EventPatched, "alice", "")); !ok {
		t.Fatalf("alice's own patched record refused: %+v", b)
	}
	if n := len(inFlight()); n != 0 {
		t.Errorf("%d plans still in flight after alice's patched record", n)
	}
	if s := ss.Session("s"); !s.Open() {
		t.Errorf("resolving closed the session: %+v", s.Closed)
	}
}

// TestCloseWithoutRestore: a close the Application did not follow (here
// appended in mallory's own name while the session held it) is named when
// the session is closed again, and the later close is the one that counts.
func TestCloseWithoutRestore(t *testing.T) {
	steps := []step{
		{EventPlanned, "s", "alice", "web", StatusStarted, ""},
		{EventPaused, "s", "alice", "web", "", ""},
		{EventPatched, "s", "alice", "web", "", ""},
		{EventRestored, "s", "mallory", "web", "", ""},
		{EventForced, "s", "carol", "web", StatusStarted, ""},
		{EventForced, "s", "carol", "web", "", ""},
	}
	for check, start := range checks {
		ss := start()
		var breaks []*Break
		for i, st := range steps {
			if _, b := ss.Add(st.record(i + 1)); b != nil {
				breaks = append(breaks, b)
			}
		}
		if len(breaks) != 1 || breaks[0].Kind != BreakCloseWithoutRestore || breaks[0].Seq != 4 {
			t.Fatalf("%s: breaks %+v; want close-without-restore at record 4", check, breaks)
		}
		if s := ss.Session("s"); s.Closed == nil || s.Closed.Seq != 6 || s.Closed.Actor.Username != "carol" {
			t.Errorf("%s: the session's close is %+v; want carol's forced record 6", check, s.Closed)
		}
	}
}

// TestConcurrentJoinsByOnePersonEndTheirOwnRuns: three joins by the same
// person at once; the one that records first ends its own plan, not the
// oldest of that person's (which made a later join write back a finished
// run's mark beside its record: a patch counted twice).
func TestConcurrentJoinsByOnePersonEndTheirOwnRuns(t *testing.T) {
	app := &AppRef{Namespace: "argocd", Name: "web"}
	rec := func(id string, event Event, status string, pid int) *Record {
		return &Record{ID: id, Event: event, Session: "s", Actor: Actor{Username: "alice"}, Client: Client{Host: "h", PID: pid}, Application: app, Outcome: Outcome{Status: status}}
	}
	records := []*Record{
		rec("p0", EventPlanned, StatusStarted, 10), rec("x0", EventPaused, StatusSucceeded, 10), rec("x1", EventPatched, StatusSucceeded, 10),
		rec("pa", EventPlanned, StatusStarted, 11), rec("pb", EventPlanned, StatusStarted, 12), rec("pc", EventPlanned, StatusStarted, 13),
		rec("xc", EventPatched, StatusSucceeded, 13),
	}
	_, ss := Legal(records)
	var ids []string
	for _, p := range ss.Session("s").InFlight {
		ids = append(ids, p.ID)
	}
	if strings.Join(ids, ",") != "pa,pb" {
		t.Errorf("runs in flight %v, want pa,pb (pc recorded its patch)", ids)
	}
}

// TestUnreviewedInBothChecks: the sessions no approval stands for are the
// same whether closed sessions are kept whole or compact.
func TestUnreviewedInBothChecks(t *testing.T) {
	steps := []step{
		{EventPlanned, "a", "alice", "web", StatusStarted, ""},
		{EventPaused, "a", "alice", "web", "", ""},
		{EventRestored, "a", "carol", "web", "", ""},
		{EventPlanned, "b", "bob", "api", StatusStarted, ""},
		{EventPaused, "b", "bob", "api", "", ""},
		{EventRestored, "b", "carol", "api", "", ""},
		{EventReviewed, "b", "rita", "api", "", ""},
		{EventPlanned, "c", "bob", "db", StatusStarted, ""},
		{EventAborted, "c", "bob", "db", StatusFailed, ""},
	}
	for check, start := range checks {
		ss := start()
		for i, st := range steps {
			ss.Add(st.record(i + 1))
		}
		got := ss.Unreviewed()
		if len(got) != 1 || got[0].ID != "a" || got[0].Closed.Seq != 3 {
			t.Errorf("%s: unreviewed %+v, want session a closed at 3", check, got)
		}
	}
}

// TestARecordAfterTheCloseCostsTheSameHoweverBigTheSession: the lean
// check copies no member or ticket set for a record of a closed session
// (it did, so a member's thousands of ticket records after the close
// made audit verify quadratic).
func TestARecordAfterTheCloseCostsTheSameHoweverBigTheSession(t *testing.T) {
	ss := newLeanSessions()
	seq := 0
	add := func(st step) {
		seq++
		ss.Add(st.record(seq))
	}
	add(step{EventPlanned, "s", "alice", "web", StatusStarted, ""})
	add(step{EventPaused, "s", "alice", "web", "", ""})
	for i := 0; i < 2000; i++ {
		add(step{EventTicketed, "s", "alice", "web", "", "OPS-" + strconv.Itoa(i)})
		add(step{EventPlanned, "s", "joiner-" + strconv.Itoa(i), "web", StatusStarted, ""})
	}
	add(step{EventRestored, "s", "carol", "web", "", ""})
	queued := step{EventQueued, "s", "alice", "web", StatusQueued, "OPS-7"}.record(seq + 1)
	if ok, b := ss.Add(queued); !ok || b != nil {
		t.Fatalf("ticket work after the close: %v %v", ok, b)
	}
	if allocs := testing.AllocsPerRun(20, func() { ss.Add(queued) }); allocs > 10 {
		t.Errorf("a record after the close of a session with 2,000 members and tickets allocates %.0f times", allocs)
	}
}
