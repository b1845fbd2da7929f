package audit

import (
	"context"
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
	store := NewConfigMapStore(client, "argocd")
	add := func() *Record {
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
	rep, err := VerifyStore(ctx, store)
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
