package audit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestAppendPastForeignObjectsAndABogusHead: a ConfigMap at the next
// position that holds no record, and a head moved far past the log, neither
// block appends nor hide the records written after them.
func TestAppendPastForeignObjectsAndABogusHead(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	add := func() *Record {
		// Each append is a new command, as when the objects are planted
		// between runs: a store of its own, remembering nothing.
		store := NewConfigMapStore(client, "argocd")
		r := &Record{Event: EventPlanned, Actor: Actor{Username: "oncall"}, Outcome: Outcome{Status: StatusStarted}}
		if err := store.Append(ctx, r); err != nil {
			t.Fatalf("append: %v", err)
		}
		return r
	}
	add()
	second := add()
	junk := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordName(3), Namespace: "argocd", Labels: map[string]string{LabelKind: "record"}}, Data: map[string]string{"record": "jammed"}}
	if _, err := client.CoreV1().ConfigMaps("argocd").Create(ctx, junk, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	past := add()
	if past.Seq != 4 || past.Prev != second.Hash {
		t.Fatalf("the record after a foreign object: seq %d prev %.12s, want 4 linking to record 2 (%.12s)", past.Seq, past.Prev, second.Hash)
	}
	head, _ := client.CoreV1().ConfigMaps("argocd").Get(ctx, HeadName, metav1.GetOptions{})
	head.Data = headData(HeadState{Seq: 999999999, Hash: "bogus"})
	if _, err := client.CoreV1().ConfigMaps("argocd").Update(ctx, head, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	after := add()
	if after.Seq != 5 || after.Prev != past.Hash {
		t.Fatalf("the record after a bogus head: seq %d prev %.12s, want 5 linking to record 4", after.Seq, after.Prev)
	}
	rep, kinds := verifyKinds(t, client)
	// The head is named twice, as warnings: by the note record 5 carries,
	// and because it still names a record beyond the log.
	if rep.Records != 5 || kinds[BreakAltered] != 1 || kinds[BreakHeadMismatch] != 1 || kinds[BreakHeadAhead] != 1 || len(rep.Breaks) != 1 || len(rep.Warnings) != 2 {
		t.Errorf("verify: %d records, breaks %v, warnings %v; want the foreign object and the head named, nothing else", rep.Records, rep.Breaks, rep.Warnings)
	}
	if after.HeadFound == nil || after.HeadFound.Seq != 999999999 {
		t.Errorf("record 5 does not say which head it found wrong: %+v", after.HeadFound)
	}
}

// TestAppendNeverBelievesAWrongHead: a head faked at its own position, a
// head jumped one past the log, a head nobody can update, and an object
// planted at the last record name: each time the honest record links to
// the true tip, and verify warns of the head (or names the planted object),
// never blaming the honest record.
func TestAppendNeverBelievesAWrongHead(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		tamper func(t *testing.T, client *fake.Clientset, tip *Record)
		// want are the kinds verify must name (breaks and warnings), with
		// how many; the head is repaired when it is left naming the true
		// tip.
		want     map[BreakKind]int
		repaired bool
	}{
		"faked hash at the tip": {func(t *testing.T, c *fake.Clientset, tip *Record) {
			setHead(t, c, func(h *corev1.ConfigMap) { h.Data = headData(HeadState{Seq: tip.Seq, Hash: "bogus"}) })
		}, map[BreakKind]int{BreakHeadMismatch: 1}, true},
		"jumped one past the log": {func(t *testing.T, c *fake.Clientset, tip *Record) {
			setHead(t, c, func(h *corev1.ConfigMap) { h.Data = headData(HeadState{Seq: tip.Seq + 1, Hash: "bogus"}) })
		}, map[BreakKind]int{BreakHeadMismatch: 1}, true},
		"unreadable": {func(t *testing.T, c *fake.Clientset, tip *Record) {
			setHead(t, c, func(h *corev1.ConfigMap) { h.Data = map[string]string{"seq": "x", "hash": "bogus"} })
		}, map[BreakKind]int{BreakHeadMismatch: 1}, true},
		"frozen": {func(t *testing.T, c *fake.Clientset, tip *Record) {
			c.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("field is immutable")
			})
		}, map[BreakKind]int{BreakHeadBehind: 1}, false},
		"an object at the last record name": {func(t *testing.T, c *fake.Clientset, tip *Record) {
			far := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordName(maxSeq), Namespace: "argocd", Labels: map[string]string{LabelKind: "record"}},
				Data: map[string]string{"record": `{"schema":2,"id":"x","seq":9999999999,"event":"breakglass.planned","hash":"h","prev":""}`}}
			if _, err := c.CoreV1().ConfigMaps("argocd").Create(ctx, far, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			setHead(t, c, func(h *corev1.ConfigMap) { h.Data = headData(HeadState{Seq: maxSeq, Hash: "h"}) })
			// The API server counts what a namespace holds.
			c.PrependReactor("list", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.(k8stesting.ListAction).GetListRestrictions().Labels.String() != "" {
					return false, nil, nil
				}
				all, err := c.Tracker().List(corev1.SchemeGroupVersion.WithResource("configmaps"), corev1.SchemeGroupVersion.WithKind("ConfigMap"), "argocd")
				if err != nil {
					return true, nil, err
				}
				list := all.(*corev1.ConfigMapList)
				n := int64(len(list.Items))
				if limit := a.(k8stesting.ListActionImpl).ListOptions.Limit; limit > 0 && int64(limit) < n {
					rest := n - limit
					list.Items, list.RemainingItemCount = list.Items[:limit], &rest
				}
				return true, list, nil
			})
		}, map[BreakKind]int{BreakHeadMismatch: 1, BreakMissing: 1, BreakAltered: 1, BreakMutable: 1, BreakRelabelled: 1}, false},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			add := func() (*Record, error) {
				r := &Record{Event: EventPlanned, Session: "s-" + name, Actor: Actor{Username: "oncall"}, Application: &AppRef{Namespace: "argocd", Name: "web"}, Outcome: Outcome{Status: StatusStarted}}
				return r, NewConfigMapStore(client, "argocd").Append(ctx, r)
			}
			add()
			tip, _ := add()
			tc.tamper(t, client, tip)
			honest, err := add()
			if err != nil {
				t.Fatalf("append after the head was tampered with: %v", err)
			}
			if honest.Seq != tip.Seq+1 || honest.Prev != tip.Hash {
				t.Fatalf("honest record: seq %d prev %.12s, want %d linking to %.12s", honest.Seq, honest.Prev, tip.Seq+1, tip.Hash)
			}
			rep, kinds := verifyKinds(t, client)
			for _, b := range rep.Breaks {
				if b.Seq == honest.Seq {
					t.Errorf("the honest record is blamed: %s", b)
				}
			}
			if !reflect.DeepEqual(kinds, tc.want) {
				t.Errorf("breaks %v, warnings %v, want %v", rep.Breaks, rep.Warnings, tc.want)
			}
			if head, _ := NewConfigMapStore(client, "argocd").Head(ctx); tc.repaired && (head.Seq != honest.Seq || head.Hash != honest.Hash) {
				t.Errorf("head %+v, want it repaired to record %d", head, honest.Seq)
			}
		})
	}
}

// verifyKinds verifies the log in client's argocd namespace and counts
// its breaks and warnings by kind. A finding about the head is only ever a
// warning.
func verifyKinds(t *testing.T, client *fake.Clientset) (Report, map[BreakKind]int) {
	t.Helper()
	rep, err := VerifyStore(context.Background(), NewConfigMapStore(client, "argocd"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[BreakKind]int{}
	for _, b := range rep.Breaks {
		kinds[b.Kind]++
		if b.Name == "head" {
			t.Errorf("the head is a break, not a warning: %s", b)
		}
	}
	for _, w := range rep.Warnings {
		kinds[w.Kind]++
	}
	return rep, kinds
}

func setHead(t *testing.T, c *fake.Clientset, edit func(*corev1.ConfigMap)) {
	t.Helper()
	head, err := c.CoreV1().ConfigMaps("argocd").Get(context.Background(), HeadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edit(head)
	if _, err := c.CoreV1().ConfigMaps("argocd").Update(context.Background(), head, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestEntriesCountsWhatItRead: Listed hears the running count after each
// page, ending at every object read (for a verify's progress line).
func TestEntriesCountsWhatItRead(t *testing.T) {
	ctx := context.Background()
	store := NewConfigMapStore(fake.NewSimpleClientset(), "argocd")
	for i := 0; i < 5; i++ {
		if err := store.Append(ctx, &Record{Event: EventPlanned, Actor: Actor{Username: "oncall"}}); err != nil {
			t.Fatal(err)
		}
	}
	var heard []int
	store.Listed = func(n int) { heard = append(heard, n) }
	entries, err := store.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(heard) == 0 || heard[len(heard)-1] != len(entries) || len(entries) != 5 {
		t.Errorf("Listed heard %v for %d entries", heard, len(entries))
	}
}

// shuffled is a store that walks its positions newest first, as no store
// here does: VerifyStore must then still give Verify's answer.
type shuffled struct{ *FileStore }

func (s shuffled) Walk(ctx context.Context, f Filter, fn func(Entry) error) error {
	entries, err := s.Entries(ctx, f)
	if err != nil {
		return err
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if err := fn(entries[i]); err != nil {
			return err
		}
	}
	return nil
}

// TestVerifyStoreStreamsAndNeverTrustsOrder: verifying as the store is
// walked gives the answer of verifying the whole list sorted, for a
// tampered chain, with witnesses, and for a store that walks out of order.
func TestVerifyStoreStreamsAndNeverTrustsOrder(t *testing.T) {
	ctx := context.Background()
	file := &FileStore{Path: filepath.Join(t.TempDir(), "log.jsonl")}
	var hashes []string
	for i := 0; i < 6; i++ {
		r := &Record{Event: EventPlanned, Actor: Actor{Username: "oncall"}, Outcome: Outcome{Status: StatusStarted}}
		if err := file.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, r.Hash)
	}
	// Edit record 3 in place.
	data, _ := os.ReadFile(file.Path)
	lines := strings.SplitAfter(string(data), "\n")
	lines[2] = strings.Replace(lines[2], "oncall", "oncalL", 1)
	if err := os.WriteFile(file.Path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	witnesses := []Witness{{Where: "OPS-1", HeadState: HeadState{Seq: 2, Hash: hashes[1]}}, {Where: "OPS-2", HeadState: HeadState{Seq: 5, Hash: "rewritten"}}}
	entries, _ := file.Entries(ctx, Filter{})
	want := Verify(entries, nil)
	want.Witnesses = 2
	want.Breaks = append(want.Breaks, CheckWitnesses(entries, witnesses)...)
	for _, store := range []Store{file, shuffled{file}} {
		got, err := VerifyStore(ctx, store, witnesses, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%T: got %+v\nwant %+v", store, got, want)
		}
	}
	kinds := map[BreakKind]int{}
	for _, b := range want.Breaks {
		kinds[b.Kind]++
	}
	if kinds[BreakAltered] != 1 || kinds[BreakWitness] != 1 {
		t.Errorf("breaks %v: want the edited record and the rewritten witness", want.Breaks)
	}
}

// TestAppendRemembersItsTip: a store's second append writes the record and
// the head and reads nothing; when another writer appended in between, the
// create at the remembered position fails and the record still links to
// the true tip.
func TestAppendRemembersItsTip(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	mine, theirs := NewConfigMapStore(client, "argocd"), NewConfigMapStore(client, "argocd")
	add := func(store *ConfigMapStore) *Record {
		r := &Record{Event: EventPlanned, Actor: Actor{Username: "oncall"}, Outcome: Outcome{Status: StatusStarted}}
		if err := store.Append(ctx, r); err != nil {
			t.Fatalf("append: %v", err)
		}
		return r
	}
	add(mine)
	client.ClearActions()
	second := add(mine)
	var verbs []string
	for _, a := range client.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if strings.Join(verbs, " ") != "create update" {
		t.Errorf("the second append sent %v, want the record's create and the head's update only", verbs)
	}
	other := add(theirs)
	third := add(mine)
	if other.Prev != second.Hash || third.Seq != 4 || third.Prev != other.Hash {
		t.Errorf("after another writer: seq %d prev %.12s, want 4 linking to its record %.12s", third.Seq, third.Prev, other.Hash)
	}
	if rep, err := VerifyStore(ctx, mine, nil, nil); err != nil || !rep.Intact() || rep.Records != 4 {
		t.Errorf("verify: %v %+v", err, rep)
	}
}

// appendTo appends a record to the log in client's argocd namespace as a
// new command does: a store of its own, remembering nothing.
func appendTo(t *testing.T, client *fake.Clientset) *Record {
	t.Helper()
	r := &Record{Event: EventPatched, Actor: Actor{Username: "oncall"}, Outcome: Outcome{Status: StatusSucceeded}}
	if err := NewConfigMapStore(client, "argocd").Append(context.Background(), r); err != nil {
		t.Fatalf("append: %v", err)
	}
	return r
}

// requests are the verbs client was sent since it was last cleared; a list
// says whether it was limited to one item (the count of the namespace).
func requests(client *fake.Clientset) []string {
	var verbs []string
	for _, a := range client.Actions() {
		verb := a.GetVerb()
		if list, ok := a.(k8stesting.ListActionImpl); ok && list.ListOptions.Limit != 1 {
			verb = "list-all"
		}
		verbs = append(verbs, verb)
	}
	return verbs
}

// TestAHeadFarAheadCostsAFewReads: an on-call user moved the head, 1000
// records at a time, far past the log, where writers never move it back.
// Every append of a new command used to list the whole namespace to find
// the log's end, and every record noted the same head. Now an append
// probes record names (a few dozen reads, no listing), lands at the real
// end, notes the head once, and an append of the same store sends only
// its record; verify warns of the head, and the log stays intact.
func TestAHeadFarAheadCostsAFewReads(t *testing.T) {
	client := fake.NewSimpleClientset()
	const n = 300
	var last *Record
	store := NewConfigMapStore(client, "argocd")
	for i := 0; i < n; i++ {
		last = &Record{Event: EventPatched, Actor: Actor{Username: "oncall"}, Outcome: Outcome{Status: StatusSucceeded}}
		if err := store.Append(context.Background(), last); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(n + 1000); seq <= n+5000; seq += 1000 {
		setHead(t, client, func(h *corev1.ConfigMap) { h.Data = headData(HeadState{Seq: seq, Hash: strings.Repeat("f", 64)}) })
	}
	far := HeadState{Seq: n + 5000, Hash: strings.Repeat("f", 64)}

	for i, want := range []*HeadState{&far, nil} {
		client.ClearActions()
		r := appendTo(t, client)
		if r.Seq != last.Seq+1 || r.Prev != last.Hash {
			t.Fatalf("append %d: record %d linking to %.12s, want %d linking to %.12s", i, r.Seq, r.Prev, last.Seq+1, last.Hash)
		}
		if !reflect.DeepEqual(r.HeadFound, want) {
			t.Errorf("append %d notes the head %+v, want %+v (noted once)", i, r.HeadFound, want)
		}
		verbs := requests(client)
		if slices.Contains(verbs, "list-all") || len(verbs) > 30 {
			t.Errorf("append %d sent %d requests %v; want a few dozen reads and no listing", i, len(verbs), verbs)
		}
		last = r
	}
	mine := NewConfigMapStore(client, "argocd")
	appendWith(t, mine)
	client.ClearActions()
	appendWith(t, mine)
	if verbs := requests(client); !slices.Equal(verbs, []string{"create"}) {
		t.Errorf("a store's second append sent %v, want its record's create only: the head ahead stays", verbs)
	}
	if head, _ := mine.Head(context.Background()); *head != far {
		t.Errorf("a writer moved the head from %+v to %+v", far, *head)
	}
	// Records that noted the same head are named together, once.
	rep, kinds := verifyKinds(t, client)
	if !rep.Intact() || !reflect.DeepEqual(kinds, map[BreakKind]int{BreakHeadAhead: 1, BreakHeadMismatch: 1}) {
		t.Errorf("verify: breaks %v, warnings %v; want the head ahead and the records that noted it", rep.Breaks, rep.Warnings)
	}
}

func appendWith(t *testing.T, s *ConfigMapStore) *Record {
	t.Helper()
	r := &Record{Event: EventPatched, Actor: Actor{Username: "oncall"}, Outcome: Outcome{Status: StatusSucceeded}}
	if err := s.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRepairHeadPutsTheHeadBackOnTheLog: whatever the head says (far
// ahead, behind, another hash, unreadable, or nothing at all), the repair
// appends audit.head-repaired at the log's end saying what the head said,
// points the head at it (backwards too), and verify is clean again: the
// notes of the wrong head before the repair are answered by it.
func TestRepairHeadPutsTheHeadBackOnTheLog(t *testing.T) {
	ctx := context.Background()
	for name, tamper := range map[string]func(t *testing.T, c *fake.Clientset, tip *Record){
		"far ahead": func(t *testing.T, c *fake.Clientset, _ *Record) {
			setHead(t, c, func(h *corev1.ConfigMap) { h.Data = headData(HeadState{Seq: 4000, Hash: "bogus"}) })
		},
		"behind": func(t *testing.T, c *fake.Clientset, _ *Record) {
			setHead(t, c, func(h *corev1.ConfigMap) { h.Data = headData(HeadState{Seq: 1, Hash: "bogus"}) })
		},
		"another hash": func(t *testing.T, c *fake.Clientset, tip *Record) {
			setHead(t, c, func(h *corev1.ConfigMap) { h.Data = headData(HeadState{Seq: tip.Seq, Hash: "bogus"}) })
		},
		"unreadable": func(t *testing.T, c *fake.Clientset, _ *Record) {
			setHead(t, c, func(h *corev1.ConfigMap) { h.Data = map[string]string{"seq": "x", "hash": "bogus"} })
		},
		"missing": func(t *testing.T, c *fake.Clientset, _ *Record) {
			if err := c.CoreV1().ConfigMaps("argocd").Delete(ctx, HeadName, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			appendTo(t, client)
			tip := appendTo(t, client)
			before, _ := NewConfigMapStore(client, "argocd").Head(ctx)
			tamper(t, client, tip)
			wrong, _ := NewConfigMapStore(client, "argocd").Head(ctx)
			if reflect.DeepEqual(before, wrong) {
				t.Fatal("the tamper changed nothing")
			}
			if name == "far ahead" {
				// A command appends past it, noting it.
				tip = appendTo(t, client)
				wrong, _ = NewConfigMapStore(client, "argocd").Head(ctx)
			}
			if rep, _ := verifyKinds(t, client); !rep.Intact() || len(rep.Warnings) == 0 {
				t.Errorf("verify before the repair: breaks %v, warnings %v; want the head named, as a warning", rep.Breaks, rep.Warnings)
			}
			r := &Record{Actor: Actor{Username: "admin"}, Outcome: Outcome{Status: StatusSucceeded}}
			if err := NewConfigMapStore(client, "argocd").RepairHead(ctx, r); err != nil {
				t.Fatal(err)
			}
			if r.Event != EventHeadRepaired || r.Seq != tip.Seq+1 || r.Prev != tip.Hash || !reflect.DeepEqual(r.HeadBefore, wrong) {
				t.Errorf("repair record: %s %d linking to %.12s, head before %+v; want %s %d linking to %.12s, head before %+v",
					r.Event, r.Seq, r.Prev, r.HeadBefore, EventHeadRepaired, tip.Seq+1, tip.Hash, wrong)
			}
			if head, _ := NewConfigMapStore(client, "argocd").Head(ctx); head == nil || *head != (HeadState{Seq: r.Seq, Hash: r.Hash}) {
				t.Errorf("head after the repair %+v, want record %d", head, r.Seq)
			}
			if rep, kinds := verifyKinds(t, client); !rep.Intact() || len(kinds) != 0 {
				t.Errorf("verify after the repair: breaks %v, warnings %v", rep.Breaks, rep.Warnings)
			}
			next := appendTo(t, client)
			if head, _ := NewConfigMapStore(client, "argocd").Head(ctx); next.Prev != r.Hash || next.HeadFound != nil || *head != (HeadState{Seq: next.Seq, Hash: next.Hash}) {
				t.Errorf("the append after the repair: prev %.12s, head found %+v, head %+v", next.Prev, next.HeadFound, head)
			}
		})
	}
}

// TestPlantedObjectsDrawTheLogNoFurtherThanTheNamespaceHolds: objects
// planted at record names far beyond the log, where steps that double
// would look, with the head pointed at the furthest: appends and repairs
// find the log's end no further on than the namespace holds objects, not
// at the plants (which would use up the record names).
func TestPlantedObjectsDrawTheLogNoFurtherThanTheNamespaceHolds(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	for i := 0; i < 20; i++ {
		appendTo(t, client)
	}
	planted := 0
	// Steps that double from the start look at 1, 3, 7, 15, 31, 63, …
	for at := uint64(31); at <= maxSeq; at = 2*at + 1 {
		rec := &Record{Event: EventPatched, Actor: Actor{Username: "oncall"}}
		doc, err := seal(rec, at, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().ConfigMaps("argocd").Create(ctx, RecordConfigMap("argocd", rec, doc), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		planted++
		setHead(t, client, func(h *corev1.ConfigMap) { h.Data = headData(HeadState{Seq: rec.Seq, Hash: rec.Hash}) })
	}
	objects := uint64(20 + planted + 1) // records, plants, head
	r := appendTo(t, client)
	t.Logf("the append wrote record %d; the namespace holds %d objects", r.Seq, objects)
	if r.Seq > objects+1 {
		t.Errorf("an append after %d planted objects wrote record %d; the namespace holds %d objects", planted, r.Seq, objects)
	}
	repair := &Record{Actor: Actor{Username: "admin"}}
	if err := NewConfigMapStore(client, "argocd").RepairHead(ctx, repair); err != nil {
		t.Fatal(err)
	}
	if repair.Seq > objects+2 {
		t.Errorf("the repair wrote record %d; the namespace holds %d objects", repair.Seq, objects+1)
	}
}

// TestARecordPlantedAheadIsFilledUnderAndNamed (issue 49, item 2): a
// record sealed at a position past the tip (two ahead, linking to the tip
// as the next honest record would), with the head moved onto it: two
// requests for anyone who may create records. The head was believed, so
// every append skipped the position under it for good: verify said
// "record 4 is absent" forever and named nothing planted. Now the head is
// believed only on a record linked to the one below it, the next append
// fills the empty position, later ones build on the log as it stands
// (never stepping past an honest record, so the chain never forks), and
// verify names the planted record with its writer, blaming no honest one.
func TestARecordPlantedAheadIsFilledUnderAndNamed(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	appendTo(t, client)
	appendTo(t, client)
	tip := appendTo(t, client)
	planted := &Record{Event: EventRestored, Session: "s1", Actor: Actor{Username: "lead"}, Outcome: Outcome{Status: StatusSucceeded}}
	doc, err := seal(planted, tip.Seq+2, tip.Hash)
	if err != nil {
		t.Fatal(err)
	}
	cm := RecordConfigMap("argocd", planted, doc)
	cm.Annotations[AnnotationActor] = "lead" // as the API server's policy stamps it
	if _, err := client.CoreV1().ConfigMaps("argocd").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setHead(t, client, func(h *corev1.ConfigMap) { h.Data = headData(HeadState{Seq: planted.Seq, Hash: planted.Hash}) })

	filled := appendTo(t, client)
	if filled.Seq != tip.Seq+1 || filled.Prev != tip.Hash {
		t.Fatalf("the append after the plant: record %d linking to %.12s, want %d linking to the tip %.12s", filled.Seq, filled.Prev, tip.Seq+1, tip.Hash)
	}
	// Each later append is a new command (no remembered tip): none may
	// step past a record, or the log forks.
	prev := planted
	for i := uint64(1); i <= 3; i++ {
		next := appendTo(t, client)
		if next.Seq != planted.Seq+i || next.Prev != prev.Hash {
			t.Fatalf("append %d after the fill: record %d linking to %.12s, want %d linking to record %d (%.12s)", i, next.Seq, next.Prev, planted.Seq+i, prev.Seq, prev.Hash)
		}
		prev = next
	}
	rep, kinds := verifyKinds(t, client)
	var named []Break
	for _, b := range rep.Breaks {
		if b.Seq != planted.Seq {
			t.Errorf("an honest record or position is blamed: %s", b)
		}
		named = append(named, b)
	}
	if len(named) != 1 || named[0].Kind != BreakInserted || !strings.Contains(named[0].Detail, `planted ahead of the log, created by "lead"`) || kinds[BreakMissing] != 0 {
		t.Errorf("verify: breaks %v; want record %d named as planted by lead, and no record absent", rep.Breaks, planted.Seq)
	}
	if rep.Records != 8 {
		t.Errorf("verify read %d records, want 8", rep.Records)
	}
}

// TestPrefetchedTipIsOnlyAStart: a command looks for the log's end while it
// plans (Prefetch), so its first append only writes. A record another
// writer appended meanwhile takes the position found: the append looks
// again and links after it. A head found wrong is still noted by the
// first record, as without the prefetch.
func TestPrefetchedTipIsOnlyAStart(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	appendTo(t, client)
	mine := NewConfigMapStore(client, "argocd")
	mine.Prefetch(ctx)
	client.ClearActions()
	first := &Record{Event: EventPlanned, Actor: Actor{Username: "oncall"}, Outcome: Outcome{Status: StatusStarted}}
	if err := mine.Append(ctx, first); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(requests(client), " "); got != "create update" {
		t.Errorf("the first append after a prefetch sent %q, want the record's create and the head's update", got)
	}

	// Another writer appends between the prefetch and the append.
	late := NewConfigMapStore(client, "argocd")
	late.Prefetch(ctx)
	other := appendTo(t, client)
	r := &Record{Event: EventPlanned, Actor: Actor{Username: "oncall"}, Outcome: Outcome{Status: StatusStarted}}
	if err := late.Append(ctx, r); err != nil {
		t.Fatal(err)
	}
	if r.Seq != other.Seq+1 || r.Prev != other.Hash {
		t.Errorf("appended at %d linking %.12s, want %d after the other writer's %.12s", r.Seq, r.Prev, other.Seq+1, other.Hash)
	}

	// A head moved by hand far ahead is named by the prefetched append.
	head, err := client.CoreV1().ConfigMaps("argocd").Get(ctx, HeadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wrong := HeadState{Seq: 999, Hash: strings.Repeat("ab", 32)}
	head.Data = headData(wrong)
	if _, err := client.CoreV1().ConfigMaps("argocd").Update(ctx, head, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	noted := NewConfigMapStore(client, "argocd")
	noted.Prefetch(ctx)
	n := &Record{Event: EventPlanned, Actor: Actor{Username: "oncall"}, Outcome: Outcome{Status: StatusStarted}}
	if err := noted.Append(ctx, n); err != nil {
		t.Fatal(err)
	}
	if n.HeadFound == nil || *n.HeadFound != wrong {
		t.Errorf("the prefetched append does not note the head it found wrong: %+v", n.HeadFound)
	}
	if rep, err := VerifyStore(ctx, mine, nil, nil); err != nil || rep.Records != 5 {
		t.Errorf("verify: %v %+v", err, rep)
	}
}

// TestAppendLaterMovesTheHeadInOrder: records appended with AppendLater
// are stored when it returns; the head follows in the background, and the
// next write (and WaitHead) waits for it, so the head ends on the last
// record and the chain is whole, with no record retried at a taken
// position.
func TestAppendLaterMovesTheHeadInOrder(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	store := NewConfigMapStore(client, "argocd")
	var creates atomic.Int32
	client.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates.Add(1)
		return false, nil, nil
	})
	for i, later := range []bool{true, true, false, true} {
		r := &Record{Event: EventPlanned, Actor: Actor{Username: "oncall"}}
		write := store.Append
		if later {
			write = store.AppendLater
		}
		if err := write(ctx, r); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if _, err := client.CoreV1().ConfigMaps("argocd").Get(ctx, RecordName(r.Seq), metav1.GetOptions{}); err != nil {
			t.Fatalf("append %d returned before its record was stored: %v", i, err)
		}
	}
	store.WaitHead()
	head, err := store.Head(ctx)
	if err != nil || head == nil || head.Seq != 4 {
		t.Fatalf("head %+v (%v), want record 4", head, err)
	}
	entries, err := store.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if rep := Verify(entries, head); len(rep.Breaks) > 0 || len(rep.Warnings) > 0 || rep.Records != 4 {
		t.Errorf("verify of %d records: %+v", len(entries), rep)
	}
	if got := creates.Load(); got != 5 { // four records, and the head once
		t.Errorf("%d creates, want 5: a record was retried at a position already taken", got)
	}
}
