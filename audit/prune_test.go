package audit

import (
	"context"
	"crypto/ed25519"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestVerifyAcrossTheCut: a log that starts after record 1 is intact only
// when a checkpoint signed by a key the verifier holds covers the cut and
// the chain ties to it (the first record kept links to its hash, or, after
// a prune interrupted midway, reaches the cut's record with it). Any other
// start is named: no checkpoint, records deleted past the cut, a
// checkpoint of another hash, one signed by another key or altered, or
// none checked at all.
func TestVerifyAcrossTheCut(t *testing.T) {
	entries := chain(t, 10)
	signer, keys := newTestSigner(t)
	stranger, _ := newTestSigner(t)
	hash := func(seq uint64) string { return headOf(t, entries[seq-1]).Hash }
	at := func(seq uint64) Checkpoint {
		return Checkpoint{Seq: seq, Hash: hash(seq), Records: seq, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	}
	stored := func(cp SignedCheckpoint) *StoredCheckpoint {
		return &StoredCheckpoint{Where: "configmap/" + StartName, SignedCheckpoint: cp}
	}
	altered := signer.Sign(at(4))
	altered.Payload = Checkpoint{Seq: 5, Hash: hash(5), Records: 5, Time: at(4).Time, KeyID: signer.KeyID()}.Payload()
	otherHash := at(4)
	otherHash.Hash = hash(3)
	from := func(first uint64, skip ...uint64) []Entry {
		var out []Entry
		for _, e := range entries[first-1:] {
			if !slices.Contains(skip, e.Slot) {
				out = append(out, e)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		entries []Entry
		start   *StoredCheckpoint
		keys    map[string]ed25519.PublicKey
		want    []BreakKind
	}{
		{"pruned through 4 under a checkpoint signed there", from(5), stored(signer.Sign(at(4))), keys, nil},
		{"a prune interrupted after record 2: the chain reaches record 4 with its hash", from(3), stored(signer.Sign(at(4))), keys, nil},
		{"not pruned yet, the cut written: record 4 has its hash", from(1), stored(signer.Sign(at(4))), keys, nil},
		{"truncated by hand, no checkpoint: the session's start is gone too", from(5), nil, keys, []BreakKind{BreakMissing, BreakOutOfOrder}},
		{"truncated past the cut", from(7), stored(signer.Sign(at(4))), keys, []BreakKind{BreakMissing}},
		{"a record missing below the cut, during a prune", from(3, 4), stored(signer.Sign(at(4))), keys, []BreakKind{BreakMissing, BreakCheckpoint}},
		{"the checkpoint names another hash for its record", from(5), stored(signer.Sign(otherHash)), keys, []BreakKind{BreakInserted}},
		{"a checkpoint altered after signing", from(5), stored(altered), keys, []BreakKind{BreakMissing, BreakOutOfOrder, BreakCheckpoint}},
		{"a checkpoint signed by a key of one's own", from(5), stored(stranger.Sign(at(4))), keys, []BreakKind{BreakCutUnverified}},
		{"no key to check the cut with", from(5), stored(signer.Sign(at(4))), nil, []BreakKind{BreakCutUnverified}},
		{"the cut's record and all after it deleted", from(1, 4, 5, 6, 7, 8, 9, 10)[:3], stored(signer.Sign(at(4))), keys, []BreakKind{BreakCheckpoint}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut, brk := CutOf(tc.start, tc.keys)
			rep := verifyFrom(tc.entries, nil, cut)
			if brk != nil {
				rep.Breaks = append(rep.Breaks, *brk)
			}
			var got []BreakKind
			for _, b := range rep.Breaks {
				got = append(got, b.Kind)
			}
			if !sameKinds(got, tc.want) {
				t.Errorf("breaks %v, want kinds %v", rep.Breaks, tc.want)
			}
			if tc.want == nil && (rep.Pruned == nil || !rep.Pruned.Verified || rep.Pruned.Through != 4) {
				t.Errorf("pruned %+v, want through 4, verified", rep.Pruned)
			}
			// Session s1 opened at record 1: kept from after the cut, it
			// is said once to be checked only in the mirror.
			if first := tc.entries[0].Slot; tc.want == nil && first > 1 {
				if len(rep.Warnings) != 1 || rep.Warnings[0].Kind != BreakBegunBeforeCut || rep.Warnings[0].Seq != first {
					t.Errorf("warnings %v, want session s1 begun before the cut, at record %d", rep.Warnings, first)
				}
			}
		})
	}
}

func sameKinds(got, want []BreakKind) bool {
	count := map[BreakKind]int{}
	for _, k := range got {
		count[k]++
	}
	for _, k := range want {
		count[k]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestAppendAfterTheCut: once the controller pruned the log (the start
// names the cut, the records up to it are gone), an append lands after
// the log's end and links to it, however the head was left: believed,
// deleted, or with a record planted below the cut; with every record
// after the cut gone too, it links to the cut's hash. VerifyStore, given
// the key, finds the pruned log intact.
func TestAppendAfterTheCut(t *testing.T) {
	ctx := context.Background()
	signer, keys := newTestSigner(t)
	client := fake.NewSimpleClientset()
	var recs []*Record
	for range 10 {
		recs = append(recs, appendTo(t, client))
	}
	store := NewConfigMapStore(client, "argocd")
	cut := Checkpoint{Seq: 6, Hash: recs[5].Hash, Records: 6, Time: time.Now().UTC().Truncate(time.Second)}
	if err := store.PutStart(ctx, signer.Sign(cut)); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 6; seq++ {
		if err := store.DeleteRecord(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	if r := appendTo(t, client); r.Seq != 11 || r.Prev != recs[9].Hash {
		t.Fatalf("append after the cut, head believed: seq %d prev %.12s, want 11 linking to record 10", r.Seq, r.Prev)
	}
	if err := client.CoreV1().ConfigMaps("argocd").Delete(ctx, HeadName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	planted := RecordConfigMap("argocd", &Record{Seq: 1, Event: EventPlanned, Actor: Actor{Username: "oncall"}}, []byte(`{"seq":1}`))
	if _, err := client.CoreV1().ConfigMaps("argocd").Create(ctx, planted, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	twelfth := appendTo(t, client)
	if twelfth.Seq != 12 {
		t.Fatalf("append with no head and a record planted at 1: seq %d, want 12", twelfth.Seq)
	}
	if err := client.CoreV1().ConfigMaps("argocd").Delete(ctx, RecordName(1), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyStore(ctx, store, nil, keys)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() || rep.Records != 6 || rep.Pruned == nil || !rep.Pruned.Verified || rep.Pruned.Through != 6 {
		t.Fatalf("verify of the pruned log: %d records, breaks %v, pruned %+v; want 7 to 12 intact after a verified cut at 6", rep.Records, rep.Breaks, rep.Pruned)
	}
	for seq := uint64(7); seq <= 12; seq++ {
		if err := store.DeleteRecord(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.CoreV1().ConfigMaps("argocd").Delete(ctx, HeadName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := appendTo(t, client); r.Seq != 7 || r.Prev != cut.Hash {
		t.Fatalf("append with nothing after the cut: seq %d prev %.12s, want 7 linking to the cut's hash %.12s", r.Seq, r.Prev, cut.Hash)
	}
}

// TestRestoreKeepsTheCut: restore-log into a log the controller pruned
// writes back only what the cluster lacks after the cut, never the
// records pruned before it.
func TestRestoreKeepsTheCut(t *testing.T) {
	ctx := context.Background()
	signer, _ := newTestSigner(t)
	client := fake.NewSimpleClientset()
	store := NewConfigMapStore(client, "argocd")
	var recs []*Record
	for range 8 {
		recs = append(recs, appendTo(t, client))
	}
	mirrored, err := store.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var kept []Entry
	for _, e := range mirrored {
		if e.Slot != 0 {
			kept = append(kept, e)
		}
	}
	if err := store.PutStart(ctx, signer.Sign(Checkpoint{Seq: 4, Hash: recs[3].Hash, Records: 4, Time: time.Now().UTC()})); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 2, 3, 4, 7, 8} {
		if err := store.DeleteRecord(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	done, err := store.Restore(ctx, kept, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done.Written, []uint64{7, 8}) || done.Present != 2 || done.Head.Seq != 8 {
		t.Errorf("restore into a log pruned through 4: wrote %v, %d present, head %d; want 7 and 8 written, 5 and 6 present, head 8", done.Written, done.Present, done.Head.Seq)
	}
	for seq := uint64(1); seq <= 4; seq++ {
		if _, held, err := store.StoredRecord(ctx, seq); err != nil || held {
			t.Errorf("record %d, pruned, was written back (%v)", seq, err)
		}
	}
}
