package audit

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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
	rep, err := VerifyStore(ctx, NewConfigMapStore(client, "argocd"), nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[BreakKind]int{}
	for _, b := range rep.Breaks {
		kinds[b.Kind]++
	}
	if rep.Records != 5 || kinds[BreakAltered] != 1 || kinds[BreakHeadMismatch] != 1 || len(rep.Breaks) != 2 {
		t.Errorf("verify: %d records, breaks %v; want the foreign object and the head named, nothing else", rep.Records, rep.Breaks)
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
