package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// TestPrunePlanNeverSplitsOrTakesAnOpenSession: the cut stops before an
// open session's first record, never lies inside a closed session, never
// takes the newest record or one the mirror lacks, and after a cut a
// session's later records (a review, ticket work) do not hold pruning.
func TestPrunePlanNeverSplitsOrTakesAnOpenSession(t *testing.T) {
	ctx := context.Background()
	log := audit.NewConfigMapStore(fake.NewSimpleClientset(), "argocd")
	add := func(session string, event audit.Event) uint64 {
		r := &audit.Record{Event: event, Session: session, Actor: audit.Actor{Username: "oncall"},
			Application: &audit.AppRef{Namespace: "argocd", Name: "app-" + session}, Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
		if err := log.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r.Seq
	}
	add("a", audit.EventPlanned) // 1
	add("a", audit.EventAborted) // 2
	add("b", audit.EventPlanned) // 3, left open
	add("c", audit.EventPlanned) // 4
	add("c", audit.EventAborted) // 5
	plan := func(from, newest uint64) prunePlan {
		t.Helper()
		// The fake API server stamps no creation time: every record is
		// older than any retention.
		p := &mirrorPass{m: &Mirroring{Log: log, PruneAfter: time.Hour}, newest: newest}
		got, err := p.plan(ctx, from, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := plan(0, 5); got.cut != 2 || len(got.held) != 2 {
		t.Errorf("with session b open at record 3: cut %d, %d held; want 2, both held", got.cut, len(got.held))
	}
	if got := plan(0, 1); got.cut != 0 {
		t.Errorf("with only record 1 mirrored: cut %d, want 0 (session a is records 1 and 2)", got.cut)
	}
	add("b", audit.EventAborted) // 6
	if got := plan(0, 6); got.cut != 2 {
		t.Errorf("with b closed at record 6, the newest: cut %d, want 2 (the newest record stays, and all of b with it)", got.cut)
	}
	add("d", audit.EventPlanned) // 7
	if got := plan(0, 7); got.cut != 6 {
		t.Errorf("with b closed and d open after it: cut %d, want 6", got.cut)
	}
	for seq := uint64(1); seq <= 6; seq++ {
		if err := log.DeleteRecord(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	add("a", audit.EventQueued)  // 8: ticket work for a session begun before the cut
	add("d", audit.EventAborted) // 9
	add("e", audit.EventPlanned) // 10
	if got := plan(6, 10); got.cut != 9 || len(got.held) != 3 {
		t.Errorf("after a cut at 6, with a's ticket work at 8: cut %d, %d held; want 9, records 7 to 9", got.cut, len(got.held))
	}
}
