package audit

import (
	"fmt"
	"runtime"
	"testing"
)

// audit verify keeps every session of the log it walks, and a log runs to
// hundreds of thousands of records: a closed session must keep only what a
// later record of it is checked against (members, tickets, reviews, the
// close), never its records' bodies. It once kept its plan and close
// whole, 2.3 kB a session, and verify's memory at 100,000 records was twice
// that at 10,000; then a session log with a stub close, 1.2 kB, and still
// 1.54 times.
func TestVerifierKeepsLittleOfAClosedSession(t *testing.T) {
	const sessions = 5000
	target := &Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}
	seal := func(i int, prev string) (Entry, string) {
		r := &Record{Session: fmt.Sprintf("s-%d", i/4), Actor: Actor{Username: "oncall", Groups: []string{"oncall"}},
			Application: &AppRef{Namespace: "argocd", Name: "web"}, Outcome: Outcome{Status: StatusSucceeded}}
		switch i % 4 {
		case 0:
			r.Event, r.Reason, r.Target, r.Outcome.Status = EventPlanned, "a reason of some length, as people write them", target, StatusStarted
		case 1:
			r.Event = EventPaused
		case 2:
			r.Event, r.Target = EventPatched, target
			r.Patch = &Patch{Type: "strategic", Body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example/web:1.2.3"}]}}}}`}
			r.Changes = []Change{{Path: "/spec/template/spec/containers/web/image", Before: "registry.example/web:1.2.4", After: "registry.example/web:1.2.3"}}
		case 3:
			r.Event, r.Reason = EventRestored, "Git has the fix"
		}
		doc, err := Seal(r, uint64(i+1), prev)
		if err != nil {
			t.Fatal(err)
		}
		return Entry{Slot: uint64(i + 1), Name: fmt.Sprint(i + 1), Doc: doc}, r.Hash
	}
	v := NewVerifier()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	prev := ""
	for i := 0; i < 4*sessions; i++ {
		var e Entry
		e, prev = seal(i, prev)
		v.Add(e)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if rep := v.Report(nil); !rep.Intact() || rep.Records != 4*sessions {
		t.Fatalf("report: %+v", rep.Breaks)
	}
	s := v.sessions.Session("s-7")
	if s == nil || s.Open() || s.Opened != nil || s.InFlight != nil || s.Closed.Reason != "" || s.Closed.Seq != 32 || !s.Members["oncall"] {
		t.Fatalf("closed session kept as %+v", s)
	}
	per := int64(after.HeapAlloc-before.HeapAlloc) / sessions
	t.Logf("%d bytes a closed session", per)
	if per > 400 {
		t.Errorf("the verifier keeps %d bytes a closed session; at 100,000 records that is %d MiB", per, per*25000>>20)
	}
	runtime.KeepAlive(v)
}
