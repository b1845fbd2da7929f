package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// chain appends n records to a fresh FileStore and returns its entries.
func chain(t testing.TB, n int) []Entry {
	t.Helper()
	s := &FileStore{Path: filepath.Join(t.TempDir(), "audit.jsonl")}
	for i := 0; i < n; i++ {
		event := EventPatched
		if i == 0 {
			event = EventPlanned // a session opens with its plan
		}
		r := &Record{Event: event, Session: "s1", Actor: Actor{Username: "oncall"}, Reason: "incident step", Application: &AppRef{Namespace: "argocd", Name: "web"}, Outcome: Outcome{Status: StatusSucceeded}}
		if err := s.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if r.Seq != uint64(i+1) || r.Hash == "" {
			t.Fatalf("append %d: seq %d hash %q", i, r.Seq, r.Hash)
		}
	}
	entries, err := s.Entries(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func headOf(t testing.TB, e Entry) *HeadState {
	r, err := Parse(e.Doc)
	if err != nil {
		t.Fatal(err)
	}
	return &HeadState{Seq: r.Seq, Hash: r.Hash}
}

func TestVerifyIntactChainLinks(t *testing.T) {
	entries := chain(t, 5)
	rep := Verify(entries, headOf(t, entries[4]))
	if !rep.Intact() || rep.Records != 5 || rep.Tip.Seq != 5 {
		t.Fatalf("intact chain reported %+v", rep)
	}
	recs := Records(entries)
	for i := 1; i < len(recs); i++ {
		if recs[i].Prev != recs[i-1].Hash {
			t.Errorf("record %d prev %s, want %s", recs[i].Seq, recs[i].Prev, recs[i-1].Hash)
		}
	}
	if recs[0].Prev != "" {
		t.Errorf("first record links to %q", recs[0].Prev)
	}
}

func TestVerifyNamesEachBreak(t *testing.T) {
	forge := func(t *testing.T, doc []byte, edit func(r *Record)) []byte {
		r, err := Parse(doc)
		if err != nil {
			t.Fatal(err)
		}
		edit(r)
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	tests := []struct {
		name   string
		tamper func(t *testing.T, es []Entry, head *HeadState) ([]Entry, *HeadState)
		want   BreakKind
		seq    uint64
	}{
		{"delete a record", func(t *testing.T, es []Entry, h *HeadState) ([]Entry, *HeadState) {
			return append(es[:2:2], es[3:]...), h
		}, BreakMissing, 3},
		{"alter content, keep hash", func(t *testing.T, es []Entry, h *HeadState) ([]Entry, *HeadState) {
			es[1].Doc = forge(t, es[1].Doc, func(r *Record) { r.Reason = "nothing to see" })
			return es, h
		}, BreakAltered, 2},
		{"swap two records", func(t *testing.T, es []Entry, h *HeadState) ([]Entry, *HeadState) {
			es[1].Doc, es[2].Doc = es[2].Doc, es[1].Doc
			return es, h
		}, BreakReordered, 2},
		{"insert a forged record at a foreign name", func(t *testing.T, es []Entry, h *HeadState) ([]Entry, *HeadState) {
			return append(es, Entry{Name: "kubectl-gitops-audit-0000000003-forged", Doc: es[2].Doc}), h
		}, BreakInserted, 0},
		{"replace a record with a re-hashed forgery", func(t *testing.T, es []Entry, h *HeadState) ([]Entry, *HeadState) {
			r, _ := Parse(es[3].Doc)
			forged := *r
			forged.Reason, forged.ID = "forged", ""
			doc, err := seal(&forged, r.Seq, "0000")
			if err != nil {
				t.Fatal(err)
			}
			es[3].Doc = doc
			return es, h
		}, BreakInserted, 4},
		{"unreadable record", func(t *testing.T, es []Entry, h *HeadState) ([]Entry, *HeadState) {
			es[0].Doc = []byte("{not json")
			return es, h
		}, BreakAltered, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := chain(t, 6)
			es, head := tt.tamper(t, entries, headOf(t, entries[5]))
			rep := Verify(es, head)
			if rep.Intact() {
				t.Fatalf("tampering not detected")
			}
			if got := rep.Breaks[0]; got.Kind != tt.want || got.Seq != tt.seq {
				t.Errorf("first break %v, want kind %s at record %d; all: %v", got, tt.want, tt.seq, rep.Breaks)
			}
		})
	}
}

// TestVerifyWarnsOfTheHead: a head rolled back, ahead of the log (moved
// on by hand, or the newest records deleted) or naming another hash is
// named, as a warning: the log stays intact, for the head hides no record
// and writers never believe it. A record's note of a wrong head is a
// warning too, until an audit.head-repaired record after it, by the user
// who created it and labelled as what it is.
func TestVerifyWarnsOfTheHead(t *testing.T) {
	log := func(t *testing.T, recs ...*Record) []Entry {
		s := &FileStore{Path: filepath.Join(t.TempDir(), "audit.jsonl")}
		for _, r := range recs {
			r.Actor, r.Outcome = Actor{Username: "oncall"}, Outcome{Status: StatusSucceeded}
			if err := s.Append(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		entries, err := s.Entries(context.Background(), Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return entries
	}
	far := &HeadState{Seq: 5000, Hash: "bogus"}
	noted := func() *Record { return &Record{Event: EventPatched, HeadFound: far} }
	plain := func() *Record { return &Record{Event: EventPatched} }
	repaired := func() *Record { return &Record{Event: EventHeadRepaired, HeadBefore: far} }
	for _, tc := range []struct {
		name    string
		records []*Record
		// head picks the head from the log's entries.
		head func(t *testing.T, es []Entry) *HeadState
		// edit changes the entries as stored, after the head is picked.
		edit func(es []Entry) []Entry
		want []BreakKind
	}{
		{name: "rolled back", records: []*Record{plain(), plain(), plain()},
			head: func(t *testing.T, es []Entry) *HeadState { return headOf(t, es[0]) }, want: []BreakKind{BreakHeadBehind}},
		{name: "the newest records deleted", records: []*Record{plain(), plain(), plain()},
			edit: func(es []Entry) []Entry { return es[:1] }, want: []BreakKind{BreakHeadAhead}},
		{name: "moved far ahead", records: []*Record{plain(), plain()},
			head: func(*testing.T, []Entry) *HeadState { return far }, want: []BreakKind{BreakHeadAhead}},
		{name: "another hash", records: []*Record{plain(), plain()},
			head: func(*testing.T, []Entry) *HeadState { return &HeadState{Seq: 2, Hash: "bogus"} }, want: []BreakKind{BreakHeadMismatch}},
		{name: "a record's note", records: []*Record{plain(), noted(), plain()}, want: []BreakKind{BreakHeadMismatch}},
		{name: "a record's note before a repair", records: []*Record{plain(), noted(), repaired(), plain()}},
		{name: "a note after the repair", records: []*Record{noted(), repaired(), noted()}, want: []BreakKind{BreakHeadMismatch}},
		{name: "a repair in another's name", records: []*Record{noted(), repaired()},
			edit: func(es []Entry) []Entry { es[1].Actor = "mallory"; return es }, want: []BreakKind{BreakHeadMismatch}},
		{name: "a repair labelled as another event", records: []*Record{noted(), repaired()},
			edit: func(es []Entry) []Entry {
				es[1].Labels = map[string]string{LabelEvent: string(EventPatched)}
				return es
			}, want: []BreakKind{BreakHeadMismatch}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := log(t, tc.records...)
			head := headOf(t, es[len(es)-1])
			if tc.head != nil {
				head = tc.head(t, es)
			}
			if tc.edit != nil {
				es = tc.edit(es)
			}
			rep := Verify(es, head)
			var got []BreakKind
			for _, w := range rep.Warnings {
				got = append(got, w.Kind)
				if w.Name != "head" {
					t.Errorf("a warning not about the head: %s", w)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("warnings %v, want %v", rep.Warnings, tc.want)
			}
			for _, b := range rep.Breaks {
				if b.Kind != BreakForged && b.Kind != BreakRelabelled {
					t.Errorf("a break: %s", b)
				}
			}
		})
	}
}

func TestHashCoversUnknownFieldsAndIgnoresKeyOrder(t *testing.T) {
	entries := chain(t, 1)
	var m map[string]any
	if err := json.Unmarshal(entries[0].Doc, &m); err != nil {
		t.Fatal(err)
	}
	reordered, _ := json.MarshalIndent(m, "", "    ") // sorted and spaced differently
	if rep := Verify([]Entry{{Slot: 1, Doc: reordered}}, nil); !rep.Intact() {
		t.Errorf("re-encoding the same record broke it: %v", rep.Breaks)
	}
	m["fromANewerSchema"] = "x"
	extended, _ := json.Marshal(m)
	if rep := Verify([]Entry{{Slot: 1, Doc: extended}}, nil); rep.Intact() {
		t.Errorf("a field added after hashing went unnoticed")
	}
}

func TestRedactKeepsSecretsOut(t *testing.T) {
	secretValues := []string{"hunter2-db", "s3cr3t-value", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlX2hlcmU", "ghp_abcdefghijklmnopqrstuvwxyz0123"}
	tests := []struct {
		name string
		rec  Record
	}{
		{"secret target", Record{
			Target:  &Target{Version: "v1", Kind: "Secret", Name: "db"},
			Patch:   &Patch{Type: "merge", Body: `{"stringData":{"url":"hunter2-db"}}`},
			Changes: []Change{{Path: "/data/url", Before: "old", After: "hunter2-db"}},
		}},
		{"secret-looking env var", Record{
			Target:  &Target{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"},
			Patch:   &Patch{Type: "strategic", Body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"DB_PASSWORD","value":"s3cr3t-value"}]}]}}}}`},
			Changes: []Change{{Path: "/spec/template/spec/containers/web/env/DB_PASSWORD/value", Before: nil, After: "s3cr3t-value"}},
		}},
		{"tokens in free text", Record{
			Reason:   "rotated Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlX2hlcmU",
			Incident: "INC-1 ghp_abcdefghijklmnopqrstuvwxyz0123",
			Outcome:  Outcome{Status: StatusFailed, Error: "token ghp_abcdefghijklmnopqrstuvwxyz0123 refused"},
		}},
		{"yaml patch body", Record{
			Target: &Target{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"},
			Patch:  &Patch{Type: "merge", Body: "metadata:\n  annotations:\n    api-token: s3cr3t-value\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.rec
			r.Event = EventPatched
			doc, err := seal(&r, 1, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range secretValues {
				if bytes.Contains(doc, []byte(v)) {
					t.Errorf("sealed record contains %q:\n%s", v, doc)
				}
			}
			if !bytes.Contains(doc, []byte(Redacted)) {
				t.Errorf("nothing was marked redacted:\n%s", doc)
			}
		})
	}
}

func TestRedactLeavesOrdinaryValues(t *testing.T) {
	r := Record{Event: EventPatched, Reason: "roll back skeleton-deployment to 1.2 (basic fix)",
		Target:  &Target{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"},
		Patch:   &Patch{Type: "strategic", Body: `{"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"web","image":"registry.example/web:1.2"}]}}}}`},
		Changes: []Change{{Path: "/spec/replicas", Before: 2.0, After: 3.0}},
	}
	Redact(&r)
	if r.Reason != "roll back skeleton-deployment to 1.2 (basic fix)" || !strings.Contains(r.Patch.Body, "registry.example/web:1.2") || r.Changes[0].After != 3.0 {
		t.Errorf("ordinary values were redacted: %+v %s", r, r.Patch.Body)
	}
}

func TestParseRejectsNonRecords(t *testing.T) {
	for _, doc := range []string{``, `null`, `[]`, `{}`, `{"schema":1,"seq":1,"id":"x","event":"e"}`, `{"schema":0,"seq":1,"id":"x","event":"e","hash":"h"}`} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("Parse(%q) accepted a non-record", doc)
		}
	}
}

// FuzzParse: Parse and hashing never panic, and whatever Parse accepts can
// be hashed.
func FuzzParse(f *testing.F) {
	for _, e := range chain(f, 2) {
		f.Add(e.Doc)
	}
	f.Add([]byte(`{"schema":1,"seq":1,"id":"x","event":"e","hash":"h","changes":[{"path":"/a","before":1e400}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if _, err := Parse(doc); err != nil {
			return
		}
		if _, err := hashDocument(doc); err != nil {
			// Parse is looser than canonical JSON (duplicate keys,
			// trailing data): Verify reports such a record as altered.
			rep := Verify([]Entry{{Slot: 1, Doc: doc}}, nil)
			if rep.Intact() {
				t.Fatalf("unhashable record verified intact: %q", doc)
			}
		}
	})
}

// FuzzVerify: replacing the middle record of a chain with anything that is
// not the same record in canonical form is always detected.
func FuzzVerify(f *testing.F) {
	base := chain(f, 3)
	f.Add(base[1].Doc)
	f.Add(bytes.Replace(base[1].Doc, []byte("incident step"), []byte("incident stop"), 1))
	f.Add(base[0].Doc)
	f.Add([]byte(`{}`))
	want, _ := canonical(base[1].Doc)
	wantHash := headOf(f, base[1]).Hash
	f.Fuzz(func(t *testing.T, doc []byte) {
		es := append([]Entry(nil), base...)
		es[1].Doc = doc
		rep := Verify(es, headOf(t, base[2]))
		got, err := canonical(doc)
		same := err == nil && bytes.Equal(got, want)
		if same {
			var r Record
			same = json.Unmarshal(doc, &r) == nil && r.Hash == wantHash
		}
		if !same && rep.Intact() {
			t.Fatalf("replaced record verified intact: %q", doc)
		}
	})
}

func TestVerifyChecksStampsLabelsAndSkipsForeignObjects(t *testing.T) {
	entries := chain(t, 4)
	for i := range entries {
		entries[i].Actor = Records([]Entry{entries[i]})[0].Actor.Username
	}
	if rep := Verify(entries, headOf(t, entries[3])); !rep.Intact() {
		t.Fatalf("stamped chain: %v", rep.Breaks)
	}
	forged := append([]Entry(nil), entries...)
	forged[1].Actor = "mallory"
	rep := Verify(forged, headOf(t, forged[3]))
	if len(rep.Breaks) != 1 || rep.Breaks[0].Kind != BreakForged || !strings.Contains(rep.Breaks[0].Detail, `created by "mallory"`) {
		t.Errorf("a record whose actor is not its creator: %v", rep.Breaks)
	}
	hidden := append([]Entry(nil), entries...)
	hidden[2].Unlabelled = true
	if rep := Verify(hidden, headOf(t, hidden[3])); len(rep.Breaks) != 1 || rep.Breaks[0].Kind != BreakUnlabelled {
		t.Errorf("a record without its label: %v", rep.Breaks)
	}
	edited := append([]Entry(nil), entries...)
	edited[0].Mutable = true
	edited[1].Labels = map[string]string{LabelKind: "record", LabelEvent: "breakglass.restored", LabelApp: "web", LabelSession: "s1"}
	rep = Verify(edited, headOf(t, edited[3]))
	if len(rep.Breaks) != 2 || rep.Breaks[0].Kind != BreakMutable || rep.Breaks[1].Kind != BreakRelabelled || !strings.Contains(rep.Breaks[1].Detail, `label kubectl-gitops.io/event is "breakglass.restored", the record says "breakglass.patched"`) {
		t.Errorf("a mutable record and a relabelled one: %v", rep.Breaks)
	}
	// The admission policy judged the relabelled record by its label: no
	// command acts on it.
	for _, r := range Trusted(edited) {
		if r.Seq == Records([]Entry{edited[1]})[0].Seq {
			t.Errorf("a relabelled record is trusted: %+v", r)
		}
	}
	if n := len(Trusted(edited)); n != 3 {
		t.Errorf("%d trusted records of 4, one relabelled; want 3", n)
	}
	// A foreign object took position 3; the appender stepped past it and
	// linked record 4 to record 2. Only the foreign object is a break.
	r4 := Records([]Entry{entries[3]})[0]
	r4.Hash, r4.Prev = "", Records([]Entry{entries[1]})[0].Hash
	doc, err := seal(r4, 4, r4.Prev)
	if err != nil {
		t.Fatal(err)
	}
	jammed := []Entry{entries[0], entries[1], {Slot: 3, Name: RecordName(3), Doc: []byte("not a record")}, {Slot: 4, Name: RecordName(4), Doc: doc}}
	rep = Verify(jammed, headOf(t, jammed[3]))
	if len(rep.Breaks) != 1 || rep.Breaks[0].Kind != BreakAltered || rep.Breaks[0].Seq != 3 {
		t.Errorf("a foreign object stepped past: %v", rep.Breaks)
	}
}
