package bench

import (
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// TestSeededRecordsVerify: the records BenchmarkAuditAtScale seeds are a log
// honest runs write, so verify finds nothing in them; otherwise the
// benchmark times an error path and aborts (as it once did, when every
// seeded session opened with a patched record).
func TestSeededRecordsVerify(t *testing.T) {
	var entries []audit.Entry
	prev := ""
	add := func(seq int, r *audit.Record) {
		doc, err := audit.Seal(r, uint64(seq), prev)
		if err != nil {
			t.Fatal(err)
		}
		prev = r.Hash
		entries = append(entries, audit.Entry{Slot: uint64(seq), Name: audit.RecordName(uint64(seq)), Doc: doc, Actor: r.Actor.Username})
	}
	// Two seedings one after the other, as the benchmark grows the log
	// from 10k to 100k records: 1..9 then 11..23, with the store's own
	// appends at 10 and 24.
	for _, span := range [][2]int{{1, 10}, {11, 24}} {
		from, n := span[0], span[1]-span[0]
		for i := 0; i < n; i++ {
			add(from+i, seededRecord(from, i, n))
		}
		add(span[1], &audit.Record{Event: audit.EventRestored, Outcome: audit.Outcome{Status: audit.StatusSucceeded}})
	}
	head := &audit.HeadState{Seq: 24, Hash: prev}
	if report := audit.Verify(entries, head); !report.Intact() {
		t.Fatalf("the seeded log does not verify: %v", report.Breaks)
	}
}
