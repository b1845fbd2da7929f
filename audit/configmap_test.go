package audit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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
	// The head is named twice: by the note record 5 carries, and because
	// it still names a record beyond the log.
	if rep.Records != 5 || kinds[BreakAltered] != 1 || kinds[BreakHeadMismatch] != 2 || len(rep.Breaks) != 3 {
		t.Errorf("verify: %d records, breaks %v; want the foreign object and the head named, nothing else", rep.Records, rep.Breaks)
	}
	if after.HeadFound == nil || after.HeadFound.Seq != 999999999 {
		t.Errorf("record 5 does not say which head it found wrong: %+v", after.HeadFound)
	}
}

// TestAppendNeverBelievesAWrongHead: a head faked at its own position, a
// head jumped one past the log, a head nobody can update, and an object
// planted at the last record name: each time the honest record links to
// the true tip, and verify blames the head (or the planted object), never
// the honest record.
func TestAppendNeverBelievesAWrongHead(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		tamper func(t *testing.T, client *fake.Clientset, tip *Record)
		// want are the kinds verify must name, with how many; the head is
		// repaired when it is left naming the true tip.
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
		}, map[BreakKind]int{BreakHeadMismatch: 1}, false},
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
				if b.Seq == honest.Seq && b.Kind != BreakHeadMismatch {
					t.Errorf("the honest record is blamed: %s", b)
				}
			}
			if !reflect.DeepEqual(kinds, tc.want) {
				t.Errorf("breaks %v, want %v", rep.Breaks, tc.want)
			}
			if head, _ := NewConfigMapStore(client, "argocd").Head(ctx); tc.repaired && (head.Seq != honest.Seq || head.Hash != honest.Hash) {
				t.Errorf("head %+v, want it repaired to record %d", head, honest.Seq)
			}
		})
	}
}

// verifyKinds verifies the log in client's argocd namespace and counts
// its breaks by kind.
func verifyKinds(t *testing.T, client *fake.Clientset) (Report, map[BreakKind]int) {
	t.Helper()
	rep, err := VerifyStore(context.Background(), NewConfigMapStore(client, "argocd"), nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[BreakKind]int{}
	for _, b := range rep.Breaks {
		kinds[b.Kind]++
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
		got, err := VerifyStore(ctx, store, witnesses)
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
	if rep, err := VerifyStore(ctx, mine, nil); err != nil || !rep.Intact() || rep.Records != 4 {
		t.Errorf("verify: %v %+v", err, rep)
	}
}
